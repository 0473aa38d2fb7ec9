package dashboard

import (
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/paramdoc"
)

// access says whether the session's key may call an API, over which channels, and why
// not.
type access struct {
	OK bool
	// Channels lists the channels it may use, "REST, GraphQL, MCP, batch".
	Channels string
	// Why is the refusal's reason when it may not call the API.
	Why string
}

// apiRow is one row of the APIs page.
type apiRow struct {
	ID, Title, Description, Category, Method string
	Cost                                     int64
	File                                     bool
	Access                                   access
}

// keyAccess returns a function that tells whether the session's key may call an API:
// the key's (and its account's) restrictions, as the service applies them, judged with
// the principal the session authenticates as. Its reasons are the service's own
// messages.
func (h *Handler) keyAccess(r *http.Request, v *visit) (func(*catalog.API) access, error) {
	p, err := h.svc.Authenticate(r.Context(), v.Caller)
	if err != nil {
		return nil, err
	}
	return func(api *catalog.API) access {
		if err := p.CheckAPI(api.ID); err != nil {
			return access{Why: err.Error()}
		}
		var chans []string
		var why string
		for _, c := range []struct {
			ch   auth.Channel
			name string
		}{{auth.ChannelREST, "REST"}, {auth.ChannelGraphQL, "GraphQL"}, {auth.ChannelMCP, "MCP"}, {auth.ChannelBatch, "batch"}} {
			switch err := p.CheckAccess(c.ch, v.Caller.Addr); {
			case err != nil:
				why = err.Error()
			case c.ch == auth.ChannelGraphQL && api.File != nil:
				// GraphQL does not serve file APIs.
			default:
				chans = append(chans, c.name)
			}
		}
		if len(chans) == 0 {
			return access{Why: why}
		}
		return access{OK: true, Channels: strings.Join(chans, ", ")}
	}, nil
}

// apisData is the APIs page.
type apisData struct {
	APIs []apiRow
	// Usable counts the APIs the key may call.
	Usable int
}

// apisPage serves the catalog: every API with its cost and whether the session's key
// may call it.
func (h *Handler) apisPage(w http.ResponseWriter, r *http.Request, v *visit) {
	can, err := h.keyAccess(r, v)
	if err != nil {
		h.failed(w, r, v, err)
		return
	}
	var d apisData
	for _, a := range h.svc.Catalog().List() {
		row := apiRow{ID: a.ID, Title: a.Title, Description: a.Description, Category: a.Category,
			Method: a.Method, Cost: a.Cost, File: a.File != nil, Access: can(a)}
		if row.Access.OK {
			d.Usable++
		}
		d.APIs = append(d.APIs, row)
	}
	page := v.view("APIs", "apis")
	page.Data = d
	h.render(w, r, http.StatusOK, "apis", page)
}

// paramRow is one parameter in the table of an API's page.
type paramRow struct {
	Name, Type, Default, Rules, Description string
	Required                                bool
}

// apiData is the page of one API.
type apiData struct {
	API    apiRow
	Path   string
	Params []paramRow
	// File describes the file of a file API: its field, types and size.
	File *fileInfo
	// GraphQL is the root field; MCP the tool name.
	GraphQL, MCP string
	// Base is the service's root URL the snippets call.
	Base string
	// Shell are the curl and command-line snippets; Packages the generated packages'.
	Shell, Packages []code
	// GenCommand is the tollgate-gen command that makes the packages.
	GenCommand string
	// KeyVar is the environment variable the snippets read the key from.
	KeyVar string
	// Form is the try-it form; Result the answer of the last try.
	Form   tryForm
	Result *tryResult
}

// fileInfo describes the file of a file API.
type fileInfo struct {
	Field, Types, Max, Description string
	MaxBytes                       int64
}

// apiPage serves the page of the API that ?id= names.
func (h *Handler) apiPage(w http.ResponseWriter, r *http.Request, v *visit) {
	api, ok := h.apiOf(w, r, v)
	if !ok {
		return
	}
	h.renderAPI(w, r, v, api, http.StatusOK, newTryForm(api, nil), nil)
}

// apiOf returns the API that ?id= names, or answers 404.
func (h *Handler) apiOf(w http.ResponseWriter, r *http.Request, v *visit) (*catalog.API, bool) {
	id := r.URL.Query().Get("id")
	if api, ok := h.svc.Catalog().Lookup(id); ok {
		return api, true
	}
	page := v.view("API not found", "apis")
	page.Message, page.Link, page.LinkText = "The catalog has no API with this id.", "apis", "Go to the APIs"
	h.render(w, r, http.StatusNotFound, "message", page)
	return nil, false
}

// renderAPI renders the page of api with the try-it form given and the result of a
// try (nil for none).
func (h *Handler) renderAPI(w http.ResponseWriter, r *http.Request, v *visit, api *catalog.API, status int, form tryForm, res *tryResult) {
	can, err := h.keyAccess(r, v)
	if err != nil {
		h.failed(w, r, v, err)
		return
	}
	base := h.baseURL(r)
	d := apiData{
		API: apiRow{ID: api.ID, Title: api.Title, Description: api.Description, Category: api.Category,
			Method: api.Method, Cost: api.Cost, File: api.File != nil, Access: can(api)},
		Path: "/v1/" + api.ID, GraphQL: catalog.RootFieldName(api.ID), MCP: api.ID, Base: base,
		GenCommand: "tollgate-gen -catalog " + shellQuote(base+"/v1/catalog") + " -out clients" + genFlags(h.names()),
		KeyVar:     h.brand.KeyVar(), Form: form, Result: res,
	}
	for i := range api.Params {
		p := &api.Params[i]
		row := paramRow{Name: p.Name, Type: paramdoc.Type(p), Rules: paramRules(p), Description: p.Description, Required: p.Required}
		if p.Default != nil {
			row.Default = paramdoc.Value(p.Default)
		}
		d.Params = append(d.Params, row)
	}
	if f := api.File; f != nil {
		d.File = &fileInfo{Field: f.Name, Types: strings.Join(f.Types, ", "), Max: paramdoc.Bytes(f.MaxBytes),
			MaxBytes: f.MaxBytes, Description: f.Description}
	}
	if d.Shell, d.Packages, err = h.snippets(api, base); err != nil {
		h.failed(w, r, v, err)
		return
	}
	title := api.Title
	if title == "" {
		title = api.ID
	}
	page := v.view(title, "apis")
	page.Data = d
	h.render(w, r, status, "api", page)
}

// paramRules lists the rules of p in words, without those the table shows in columns
// of their own (required, default).
func paramRules(p *catalog.Param) string {
	q := *p
	q.Required, q.Default = false, nil
	return paramdoc.Rules(&q)
}

// sessionEnded reports whether err says the session no longer authenticates.
func sessionEnded(err error) bool {
	switch tollgate.CodeOf(err) {
	case tollgate.CodeUnauthorized, tollgate.CodeNoCredential, tollgate.CodeMalformedCredential:
		return true
	}
	return false
}
