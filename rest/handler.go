package rest

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/reqlog"
)

// Options configures the REST handler. The zero value is the default; every field is
// optional.
type Options struct {
	// Edge holds the HTTP settings every door shares: the trusted proxies, the
	// origins CORS allows, the IETF rate headers. The default is [edge.Default].
	Edge *edge.Edge
	// MaxBodyBytes caps a JSON request body. The default is 1 MiB. A file upload is
	// capped at its API's file limit plus MaxBodyBytes for the other form fields.
	MaxBodyBytes int64
	// BatchItemBytes is what each item of a batch adds to the cap of its body: a batch
	// body may hold MaxBodyBytes plus the plan's batch size times BatchItemBytes (with
	// the defaults and 100 items, 1 MiB + 1.56 MiB). The default is
	// [DefaultBatchItemBytes].
	BatchItemBytes int64
	// Accounts, if set, is the manager of the service's accounts, which answers what
	// GET /v1/analytics tells of usage: a sub-key's own calls, and the time series.
	// Without it a sub-key's calls are null and the time series is a 404.
	Accounts *accounts.Manager
	// OpenAPI describes the service in GET /v1/openapi.json.
	OpenAPI OpenAPIInfo
	// Brand is the operator's brand: the document's title defaults to its Name and
	// "API catalog" ([CatalogTitle]). The zero value is brand.Default(); an invalid
	// brand is an error.
	Brand brand.Brand
	// Logger receives failures to write a response. The default is slog.Default().
	Logger *slog.Logger
}

// DefaultMaxBodyBytes is the default [Options.MaxBodyBytes].
const DefaultMaxBodyBytes = 1 << 20

// Handler serves the REST front door. Create it with [NewHandler].
type Handler struct {
	svc     *tollgate.Service
	mgr     *accounts.Manager // nil: no usage in the analytics
	mux     *http.ServeMux
	door    *edge.Door
	maxBody int64
	// batchItemBytes is Options.BatchItemBytes, with its default.
	batchItemBytes int64
	openapi        openAPICache
	log            *slog.Logger
}

// NewHandler returns the REST front door of svc. Its routes are relative to where the
// host mounts it:
//
//	GET|POST /v1/{api_id}   call an API
//	POST     /v1/{api_id}/batch  many inputs through the API in one call (tollgate.Service.CallBatch)
//	GET      /v1/analytics  the caller's plan, credits, limits and usage (never billed)
//	GET      /v1/catalog    every API with its parameters and schemas (no key needed)
//	GET      /v1/openapi.json  the OpenAPI 3.1 document of the catalog (no key needed)
//	OPTIONS  /v1/...        CORS preflight (no key needed)
//
// opts may be nil.
func NewHandler(svc *tollgate.Service, opts *Options) (*Handler, error) {
	if svc == nil {
		return nil, errors.New("rest: NewHandler needs a Service")
	}
	if opts == nil {
		opts = &Options{}
	}
	if err := opts.Brand.Check(); err != nil {
		return nil, errors.New("rest: Options.Brand: " + strings.TrimPrefix(err.Error(), "brand: "))
	}
	if opts.Accounts != nil && opts.Accounts.Service() != svc {
		return nil, errors.New("rest: Options.Accounts manages the accounts of another service; give the manager of this one")
	}
	h := &Handler{
		svc:     svc,
		mgr:     opts.Accounts,
		mux:     http.NewServeMux(),
		maxBody: opts.MaxBodyBytes,
		log:     opts.Logger,
	}
	h.openapi.info = opts.OpenAPI
	if h.openapi.info.Title == "" {
		h.openapi.info.Title = CatalogTitle(opts.Brand)
	}
	if h.maxBody <= 0 {
		h.maxBody = DefaultMaxBodyBytes
	}
	h.batchItemBytes = opts.BatchItemBytes
	if h.batchItemBytes <= 0 {
		h.batchItemBytes = DefaultBatchItemBytes
	}
	if h.log == nil {
		h.log = slog.Default()
	}
	e := opts.Edge
	if e == nil {
		e = edge.Default()
	}
	h.door = e.Door(edge.DoorSpec{Methods: "GET, POST, OPTIONS", Logger: h.log})
	h.mux.HandleFunc("/v1/catalog", h.serveCatalog)
	h.mux.HandleFunc("/v1/openapi.json", h.serveOpenAPI)
	h.mux.HandleFunc("/v1/analytics", h.serveAnalytics)
	h.mux.HandleFunc("/v1/{api_id}", h.serveAPI)
	h.mux.HandleFunc("/v1/{api_id}/batch", h.serveBatch)
	h.mux.HandleFunc("/", h.serveNoRoute)
	return h, nil
}

// ServeHTTP answers CORS preflights (which need no key) and routes every other request.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodOptions {
		h.door.Preflight(w, r)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// authenticate performs the edge check and authenticates the caller, for the endpoints
// that are not calls. On failure it has written the response and returns false.
func (h *Handler) authenticate(w http.ResponseWriter, r *http.Request, ch auth.Channel) (tollgate.Principal, bool) {
	c, ok := h.door.Caller(w, r, ch)
	if !ok {
		return tollgate.Principal{}, false
	}
	p, err := h.svc.Authenticate(r.Context(), c)
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return tollgate.Principal{}, false
	}
	reqlog.From(r.Context()).Identify(p.Account.ID, p.Key.ID)
	return p, true
}

// serveAPI calls one API. The service runs the call; the handler reads the input the
// way the API takes it (its method, its query or body, its file).
func (h *Handler) serveAPI(w http.ResponseWriter, r *http.Request) {
	c, ok := h.door.Caller(w, r, auth.ChannelREST)
	if !ok {
		return
	}
	reply := h.svc.Call(r.Context(), c, r.PathValue("api_id"), func(api *catalog.API) (tollgate.Input, error) {
		if r.Method != api.Method {
			w.Header().Set("Allow", api.Method+", OPTIONS")
			return tollgate.Input{}, &tollgate.Error{Code: tollgate.CodeMethodNotAllowed,
				Message: "the " + api.ID + " API is called with " + api.Method + ", not " + r.Method}
		}
		return h.readInput(w, r, api)
	})
	if reply.Err != nil {
		h.door.WriteError(w, r, reply.Err, &reply.Receipt)
		return
	}
	if res := reply.Results[0]; res.Err != nil {
		h.door.WriteError(w, r, res.Err, &reply.Receipt)
		return
	}
	h.door.Receipt(w.Header(), &reply.Receipt)
	h.door.WriteData(w, r, http.StatusOK, reply.Results[0].JSON)
}

// serveNoRoute answers a path that names no endpoint (/v1/, /v1/hash/extra) as an
// unknown API is answered: the edge check, then a 404 envelope, so that every answer but
// the edge's is JSON.
func (h *Handler) serveNoRoute(w http.ResponseWriter, r *http.Request) {
	c, ok := h.door.Caller(w, r, auth.ChannelREST)
	if !ok {
		return
	}
	refusal := &tollgate.Error{Code: tollgate.CodeNotFound,
		Message: "no endpoint has this path; APIs are called at /v1/{api_id}, and GET /v1/catalog lists them"}
	reply := h.svc.CallAll(r.Context(), c, func() ([]tollgate.Item, error) { return nil, refusal })
	h.door.WriteError(w, r, reply.Err, &reply.Receipt)
}

// methodOnly answers a request to an endpoint that takes only GET. It returns false
// after writing a 405 for other methods.
func (h *Handler) methodOnly(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, OPTIONS")
	h.door.WriteError(w, r, &tollgate.Error{Code: tollgate.CodeMethodNotAllowed,
		Message: strings.TrimPrefix(r.URL.Path, "/") + " takes GET only"}, nil)
	return false
}

// serveCatalog lists every API with its parameters and schemas.
func (h *Handler) serveCatalog(w http.ResponseWriter, r *http.Request) {
	if !h.methodOnly(w, r) {
		return
	}
	apis := h.svc.Catalog().List()
	if apis == nil {
		apis = []*catalog.API{}
	}
	w.Header().Set("Cache-Control", "public, max-age=60")
	h.door.WriteJSON(w, r, http.StatusOK, map[string]any{"apis": apis})
}
