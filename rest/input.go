package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/catalog"
)

// Limits on the text fields of a form body.
const (
	maxFormFields     = 100
	maxFormFieldBytes = 64 << 10
)

// readInput reads the parameters of a call: the query string of a GET; for a POST, a
// JSON object body, a URL-encoded form, or (file APIs only) a multipart form whose file
// part carries the upload. Every failure is a *tollgate.Error with the right code.
func (h *Handler) readInput(w http.ResponseWriter, r *http.Request, api *catalog.API) (tollgate.Input, error) {
	query, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return tollgate.Input{}, invalid("the query string cannot be parsed: %v", err)
	}
	if api.Method == http.MethodGet {
		return tollgate.Input{Query: query}, nil
	}
	if len(query) > 0 {
		return tollgate.Input{}, invalid("the %s API takes its parameters in the request body, not in the query string", api.ID)
	}
	limit := h.maxBody
	if api.File != nil {
		limit += api.File.MaxBytes
	}
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return readJSON(r, "")
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return tollgate.Input{}, &tollgate.Error{Code: tollgate.CodeUnsupportedMediaType,
			Message: fmt.Sprintf("the Content-Type %q cannot be parsed; send application/json", ct)}
	}
	switch mt {
	case "application/json":
		return readJSON(r, mt)
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return tollgate.Input{}, bodyError(err, "the form body cannot be parsed")
		}
		return tollgate.Input{Query: r.PostForm}, nil
	case "multipart/form-data":
		if api.File == nil {
			return tollgate.Input{}, &tollgate.Error{Code: tollgate.CodeUnsupportedMediaType,
				Message: fmt.Sprintf("the %s API takes no file; send its parameters as application/json", api.ID)}
		}
		return readMultipart(r, api)
	}
	accepted := "application/json"
	if api.File != nil {
		accepted += " or multipart/form-data"
	}
	return tollgate.Input{}, &tollgate.Error{Code: tollgate.CodeUnsupportedMediaType,
		Message: fmt.Sprintf("the %s API does not take %s bodies; send %s", api.ID, mt, accepted)}
}

// readJSON decodes a JSON object body. An empty body counts as {}; a body without a
// Content-Type must be empty.
func readJSON(r *http.Request, mt string) (tollgate.Input, error) {
	d := json.NewDecoder(r.Body)
	d.UseNumber()
	var v any
	switch err := d.Decode(&v); {
	case err == io.EOF:
		return tollgate.Input{JSON: map[string]any{}}, nil
	case mt == "":
		return tollgate.Input{}, &tollgate.Error{Code: tollgate.CodeUnsupportedMediaType,
			Message: "the request body has no Content-Type; send it as application/json"}
	case err != nil:
		return tollgate.Input{}, bodyError(err, "the body is not valid JSON")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return tollgate.Input{}, invalid("the body must be a JSON object of parameters, not %s", catalog.JSONKind(v))
	}
	switch _, err := d.Token(); {
	case err == io.EOF:
	case err == nil: // another JSON value follows the object
		return tollgate.Input{}, invalid("the body must hold one JSON object and nothing after it")
	default:
		return tollgate.Input{}, bodyError(err, "the body must hold one JSON object and nothing after it")
	}
	return tollgate.Input{JSON: obj}, nil
}

// readMultipart reads a file upload: one file part in the API's file field, and text
// parts for the other parameters.
func readMultipart(r *http.Request, api *catalog.API) (tollgate.Input, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return tollgate.Input{}, bodyError(err, "the multipart body cannot be read")
	}
	fields := url.Values{}
	var file *catalog.File
	for n := 0; ; n++ {
		part, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return tollgate.Input{}, bodyError(err, "the multipart body cannot be read")
		}
		name := part.FormName()
		if part.FileName() != "" || name == api.File.Name {
			if name != api.File.Name {
				return tollgate.Input{}, invalid("unexpected file in the %q field; the %s API takes its file in the %q field", name, api.ID, api.File.Name)
			}
			if file != nil {
				return tollgate.Input{}, invalid("send one file in the %q field", name)
			}
			data, err := io.ReadAll(io.LimitReader(part, api.File.MaxBytes+1))
			if err != nil {
				return tollgate.Input{}, bodyError(err, "the file cannot be read")
			}
			if int64(len(data)) > api.File.MaxBytes {
				return tollgate.Input{}, &tollgate.Error{Code: tollgate.CodeBodyTooLarge,
					Message: fmt.Sprintf("the file is larger than the %d bytes the %s API takes", api.File.MaxBytes, api.ID)}
			}
			file = &catalog.File{Data: data}
			if fn := part.FileName(); fn != "" {
				file.Name = path.Base("/" + fn)
			}
			continue
		}
		if n >= maxFormFields {
			return tollgate.Input{}, invalid("the form has more than %d fields", maxFormFields)
		}
		v, err := io.ReadAll(io.LimitReader(part, maxFormFieldBytes+1))
		if err != nil {
			return tollgate.Input{}, bodyError(err, "the form cannot be read")
		}
		if len(v) > maxFormFieldBytes {
			return tollgate.Input{}, invalid("the form field %q is longer than %d bytes", name, maxFormFieldBytes)
		}
		fields.Add(name, string(v))
	}
	return tollgate.Input{Query: fields, File: file}, nil
}

// bodyError reports a failure to read the body: 413 when it went over the limit, 400
// otherwise.
func bodyError(err error, what string) error {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return &tollgate.Error{Code: tollgate.CodeBodyTooLarge, Err: err,
			Message: fmt.Sprintf("the request body is larger than the %d bytes allowed", tooBig.Limit)}
	}
	why := err.Error()
	switch {
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		why = "it ends too soon"
	case strings.HasPrefix(why, "multipart: "):
		// mime/multipart's words name the package.
		why = "it is not a well-formed multipart/form-data body"
	}
	return &tollgate.Error{Code: tollgate.CodeInvalidInput, Message: what + ": " + why, Err: err}
}

func invalid(format string, args ...any) error {
	return &tollgate.Error{Code: tollgate.CodeInvalidInput, Message: fmt.Sprintf(format, args...)}
}
