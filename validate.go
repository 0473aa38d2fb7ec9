package tollgate

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/safefetch"
)

// lookup returns the API with the given id, if it exists and the principal may call it.
func (s *Service) lookup(p *Principal, id string) (*catalog.API, error) {
	api, ok := s.registry.Lookup(id)
	if !ok {
		return nil, newError(CodeNotFound, fmt.Sprintf("no API has the id %q; GET /v1/catalog lists them", truncate(id, 64)), nil)
	}
	if err := p.CheckAPI(id); err != nil {
		return nil, newError(CodeForbidden, err.Error(), err)
	}
	return api, nil
}

// Input is the raw input of one API call, as a front door received it.
type Input struct {
	// Query holds parameters that arrived as text: a query string or the fields of a
	// multipart form. When it is nil, JSON is used.
	Query url.Values
	// JSON holds parameters that arrived as JSON values.
	JSON map[string]any
	// File is the file uploaded to a file API, if any.
	File *catalog.File
}

// An invocation is one validated API call, ready to run.
type invocation struct {
	API    *catalog.API
	Params catalog.Params
	// File is the uploaded file of a file API; FileURL the address to fetch it from
	// instead (after admission).
	File    *catalog.File
	FileURL string
}

// prepare validates the input of a call to api (see validate) and, for the URL form of
// a file API, checks that the address is one the service may fetch, resolving its host.
// It never charges anything; the fetch itself happens after admission.
func (s *Service) prepare(ctx context.Context, api *catalog.API, in Input) (invocation, error) {
	inv, err := validate(api, in)
	if err != nil || inv.FileURL == "" {
		return inv, err
	}
	if err := s.fetcher.Check(ctx, inv.FileURL); err != nil {
		return invocation{}, fetchError(err)
	}
	return inv, nil
}

// validate validates the input of a call to api without the network: its parameters,
// and for a file API the uploaded file's size and type, or the presence of a url for the
// URL form, whose address prepare checks.
func validate(api *catalog.API, in Input) (invocation, error) {
	var (
		params catalog.Params
		err    error
	)
	if in.Query != nil {
		params, err = api.ValidateQuery(in.Query)
	} else {
		params, err = api.ValidateJSON(in.JSON)
	}
	if err != nil {
		return invocation{}, newError(CodeInvalidInput, err.Error(), err)
	}
	inv := invocation{API: api, Params: params, File: in.File}
	if api.File == nil {
		if in.File != nil {
			return invocation{}, newError(CodeInvalidInput, fmt.Sprintf("the %s API takes no file", api.ID), nil)
		}
		return inv, nil
	}
	inv.FileURL = params.String(catalog.URLParam)
	delete(params, catalog.URLParam)
	switch {
	case in.File != nil && inv.FileURL != "":
		return invocation{}, newError(CodeInvalidInput, fmt.Sprintf("send either a file in the %s field or a url, not both", api.File.Name), nil)
	case in.File != nil:
		return inv, checkFile(api, in.File)
	case inv.FileURL != "":
		return inv, nil
	}
	return invocation{}, newError(CodeInvalidInput, fmt.Sprintf(
		"the %s API needs a file: upload it as multipart/form-data in the %s field, or pass its address in the url parameter",
		api.ID, api.File.Name), nil)
}

// checkFile checks an uploaded or fetched file against the API's file field, and
// records the media type detected from its content.
func checkFile(api *catalog.API, f *catalog.File) error {
	ff := api.File
	if int64(len(f.Data)) > ff.MaxBytes {
		return newError(CodeBodyTooLarge, fmt.Sprintf("the file is %d bytes; the %s API takes at most %d", len(f.Data), api.ID, ff.MaxBytes), nil)
	}
	if len(f.Data) == 0 {
		return newError(CodeInvalidInput, "the file is empty", nil)
	}
	ct := http.DetectContentType(f.Data)
	if !slices.Contains(ff.Types, ct) {
		return newError(CodeInvalidInput, fmt.Sprintf("the file is %s; the %s API takes %s", ct, api.ID, joinTypes(ff.Types)), nil)
	}
	f.ContentType = ct
	return nil
}

func fetchError(err error) error {
	var fe *safefetch.Error
	if errors.As(err, &fe) && fe.Reason == safefetch.ReasonTooLarge {
		return newError(CodeBodyTooLarge, err.Error(), err)
	}
	return newError(CodeInvalidInput, err.Error(), err)
}

func joinTypes(types []string) string {
	switch len(types) {
	case 0:
		return ""
	case 1:
		return types[0]
	}
	out := ""
	for i, t := range types {
		switch {
		case i == len(types)-1:
			out += " or " + t
		case i > 0:
			out += ", " + t
		default:
			out = t
		}
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
