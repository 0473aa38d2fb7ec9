package rest

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/usagehttp"
	"github.com/tollgate-dev/tollgate/wire"
)

// OpenAPIInfo describes the service in its OpenAPI document. Empty fields get defaults.
type OpenAPIInfo struct {
	// Title defaults to "Tollgate API catalog" ([CatalogTitle] of the default brand;
	// a Handler's default is that of its Options.Brand).
	Title string
	// Version is the document's version; it defaults to "1.0.0".
	Version string
	// Description is shown above the operations.
	Description string
	// ServerURL is the base URL clients call ("https://api.example.com"). The default
	// is "/", the host that served the document.
	ServerURL string
	// License, if set, names the license of the API ("Proprietary", "MIT").
	License string
	// Paths, if set, are further path items that other handlers mounted on the same
	// server serve, added to the document as they are: the self-service routes of
	// package selfservice (selfservice.OpenAPIPaths), say. They may refer to this document's
	// components: the responses BadRequest, Unauthorized, Forbidden, TooLarge and Error,
	// and the security schemes apiKey, bearer, session (the x-jwt session token) and
	// cookie (the browser's session cookie).
	Paths map[string]any
}

// CatalogTitle is the title of the OpenAPI document of a service sold under brand b
// (the zero Brand is brand.Default()): its Name and "API catalog", as in "Acme API
// catalog", and a Name that already ends with " API" ("Acme API") and "catalog".
func CatalogTitle(b brand.Brand) string {
	name := b.OrDefault().Name
	if strings.HasSuffix(name, " API") {
		return name + " catalog"
	}
	return name + " API catalog"
}

// The OpenAPI document is built from the catalog when it is first asked for after a
// change, and then served from memory.
type openAPICache struct {
	info OpenAPIInfo
	doc  atomic.Pointer[openAPIDoc]
}

type openAPIDoc struct {
	version uint64
	body    []byte
}

func (h *Handler) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	if !h.methodOnly(w, r) {
		return
	}
	reg := h.svc.Catalog()
	v := reg.Version()
	d := h.openapi.doc.Load()
	if d == nil || d.version != v {
		body, err := json.Marshal(OpenAPI(h.openapi.info, reg.List()))
		if err != nil {
			h.door.WriteError(w, r, err, nil)
			return
		}
		d = &openAPIDoc{version: v, body: body}
		h.openapi.doc.Store(d)
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json")
	hdr.Set("Cache-Control", "public, max-age=60")
	h.door.CORS(hdr, r) // after Cache-Control: a cacheable answer varies by Origin
	w.Write(d.body)
}

// OpenAPI returns the OpenAPI 3.1 document of the REST surface for the given APIs: one
// operation per API with its parameters (query parameters for GET, a JSON body for POST,
// and a multipart upload for file APIs), the envelope of each response with the API's
// result schema, the error statuses with their X-Error-Code values, the credit and rate
// headers, the batch operation of each API (POST /v1/{api_id}/batch), and the analytics
// and catalog endpoints. It is built from the same
// definitions that validate calls, so it cannot drift from them.
//
// The document lives here rather than in package catalog because it describes REST:
// paths, statuses, headers and the envelope belong to this package.
func OpenAPI(info OpenAPIInfo, apis []*catalog.API) map[string]any {
	if info.Title == "" {
		info.Title = CatalogTitle(brand.Default())
	}
	if info.Version == "" {
		info.Version = "1.0.0"
	}
	infoObj := map[string]any{"title": info.Title, "version": info.Version}
	if info.Description != "" {
		infoObj["description"] = info.Description
	}
	if info.License != "" {
		infoObj["license"] = map[string]any{"name": info.License}
	}
	if info.ServerURL == "" {
		info.ServerURL = "/"
	}
	paths := map[string]any{
		"/v1/analytics": map[string]any{"get": map[string]any{
			"operationId": "analytics",
			"summary":     "Plan, credits, limits and usage of the calling account",
			"description": "Never billed. Any valid key may call it; a 200 means the key is good. " +
				"Without query parameters it reports the current period. With any of from, to, interval, by, api, key " +
				"or channel it reports the account's usage over time instead: one series per group, a point per bucket " +
				"with calls, credits, errors by code and latency percentiles (latency_ms). The primary key " +
				"sees the whole account; any other key (or a session it started) only its own calls. Bounds: 1 day by minute, 31 days by hour, " +
				"400 days by day; a bad parameter is a 400 whose message begins with its name.",
			"tags":       []string{"Service"},
			"parameters": usagehttp.OpenAPIParameters(),
			"responses": map[string]any{
				"200":     okResponse(map[string]any{"type": "object"}, "The account's position, or its usage over time."),
				"400":     ref("#/components/responses/BadRequest"),
				"401":     ref("#/components/responses/Unauthorized"),
				"403":     ref("#/components/responses/Forbidden"),
				"default": ref("#/components/responses/Error"),
			},
		}},
		"/v1/catalog": map[string]any{"get": map[string]any{
			"operationId": "catalog",
			"summary":     "Every API with its parameters and schemas",
			"tags":        []string{"Service"},
			"security":    []any{},
			"responses": map[string]any{
				"200": okResponse(map[string]any{"type": "object", "properties": map[string]any{
					"apis": map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
				}}, "The catalog."),
				"405": ref("#/components/responses/Error"),
			},
		}},
	}
	for _, a := range apis {
		paths["/v1/"+a.ID] = map[string]any{strings.ToLower(a.Method): operation(a)}
		paths["/v1/"+a.ID+"/batch"] = map[string]any{"post": batchOperation(a)}
	}
	for p, item := range info.Paths {
		paths[p] = item
	}
	doc := map[string]any{
		"openapi":           "3.1.0",
		"info":              infoObj,
		"jsonSchemaDialect": catalog.SchemaDialect,
		"paths":             paths,
		"security":          []any{map[string]any{"apiKey": []any{}}, map[string]any{"bearer": []any{}}},
		"components":        components(),
	}
	doc["servers"] = []any{map[string]any{"url": info.ServerURL}}
	return doc
}

func ref(to string) map[string]any { return map[string]any{"$ref": to} }

func operation(a *catalog.API) map[string]any {
	op := map[string]any{
		"operationId":   a.ID,
		"summary":       a.Title,
		"description":   a.Description,
		"x-credit-cost": a.Cost,
		"responses": map[string]any{
			"200":     okResponse(withoutDialect(a.ResultSchema()), "The API's result."),
			"400":     ref("#/components/responses/BadRequest"),
			"401":     ref("#/components/responses/Unauthorized"),
			"403":     ref("#/components/responses/Forbidden"),
			"429":     ref("#/components/responses/TooManyRequests"),
			"default": ref("#/components/responses/Error"),
		},
	}
	if a.Category != "" {
		op["tags"] = []string{a.Category}
	}
	input := withoutDialect(a.InputSchema())
	if a.Method == http.MethodGet {
		var params []any
		props, _ := input["properties"].(map[string]any)
		for i := range a.Params {
			p := &a.Params[i]
			param := map[string]any{"name": p.Name, "in": "query", "required": p.Required}
			if p.Description != "" {
				param["description"] = p.Description
			}
			if p.Type == catalog.Object {
				param["content"] = map[string]any{"application/json": map[string]any{"schema": props[p.Name]}}
			} else {
				param["schema"] = props[p.Name]
				if p.Type == catalog.Array {
					param["style"], param["explode"] = "form", true
				}
			}
			params = append(params, param)
		}
		if params != nil {
			op["parameters"] = params
		}
		return op
	}
	content := map[string]any{"application/json": map[string]any{"schema": input}}
	if a.File != nil {
		form := withoutDialect(a.InputSchema())
		props := form["properties"].(map[string]any)
		props[a.File.Name] = map[string]any{
			"type": "string", "contentMediaType": "application/octet-stream",
			"description": a.File.Description,
		}
		content["multipart/form-data"] = map[string]any{
			"schema":   form,
			"encoding": map[string]any{a.File.Name: map[string]any{"contentType": strings.Join(a.File.Types, ", ")}},
		}
		op["responses"].(map[string]any)["413"] = ref("#/components/responses/TooLarge")
	}
	op["requestBody"] = map[string]any{"required": false, "content": content}
	return op
}

// batchOperation is the batch operation of an API: its items are the objects of
// parameters that a JSON body of a call takes, its answer an envelope per item and a
// summary.
func batchOperation(a *catalog.API) map[string]any {
	description := "Runs many inputs through " + a.ID + " in one call: each item is one call (one rate-limit event) of the API, " +
		"at most the plan's batch_max_items per batch (GET /v1/analytics reports it). Every item is validated first: an invalid one " +
		"is answered with its own error and never charged, the others run. The valid items' cost is reserved at once (a balance short " +
		"of it refuses the batch: 429 credits_exhausted) and the items that fail on the service's side are refunded. " +
		"With an Idempotency-Key, a retry gets the first answer (Idempotent-Replayed: true) without running or charging again."
	item := withoutDialect(a.InputSchema())
	if a.File != nil {
		description += " A file API takes the URL form only: give each item the file's address in url."
		item["required"] = append(requiredOf(item), catalog.URLParam)
	}
	result := withoutDialect(a.ResultSchema())
	integer := map[string]any{"type": "integer", "minimum": 0}
	ok := map[string]any{"type": "object", "required": []string{"status", "error", "data", "credits"},
		"properties": map[string]any{"status": map[string]any{"const": "ok"}, "error": map[string]any{"type": "null"},
			"data": result, "credits": integer}}
	failed := map[string]any{"type": "object", "required": []string{"status", "error", "data", "code", "credits"},
		"properties": map[string]any{"status": map[string]any{"const": "error"},
			"error":   map[string]any{"type": "string", "description": "What went wrong with this item, naming the parameter."},
			"data":    map[string]any{"type": "null"},
			"code":    map[string]any{"type": "string", "description": "The item's error code, as X-Error-Code names a call's."},
			"credits": integer}}
	answer := okResponse(map[string]any{"type": "object", "required": []string{"items", "summary"}, "properties": map[string]any{
		"items": map[string]any{"type": "array", "description": "One envelope per item, in the items' order.",
			"items": map[string]any{"oneOf": []any{ok, failed}}},
		"summary": map[string]any{"type": "object", "required": []string{"ok", "failed", "credits"}, "properties": map[string]any{
			"ok": integer, "failed": integer, "credits": integer}},
	}}, "The batch ran: each item's answer, and the summary.")
	answer["headers"].(map[string]any)[wire.HeaderIdempotentReplayed] = map[string]any{
		"description": "true on the answer of a batch that ran before with this Idempotency-Key, sent again.",
		"schema":      map[string]any{"type": "string", "enum": []string{"true"}}}
	op := map[string]any{
		"operationId": a.ID + "_batch",
		"summary":     a.Title + ", many inputs at once",
		"description": description,
		"parameters": []any{map[string]any{"name": wire.HeaderIdempotencyKey, "in": "header", "required": false,
			"description": "Makes a retried batch run and charge once.",
			"schema":      map[string]any{"type": "string", "minLength": 1, "maxLength": tollgate.MaxIdempotencyKeyLength, "pattern": "^[ -~]+$"}}},
		"requestBody": map[string]any{"required": true, "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
			"type": "object", "required": []string{"items"}, "additionalProperties": false,
			"properties": map[string]any{"items": map[string]any{"type": "array", "minItems": 1, "maxItems": billing.MaxBatchItems, "items": item}},
		}}}},
		"responses": map[string]any{
			"200":     answer,
			"400":     ref("#/components/responses/BadRequest"),
			"401":     ref("#/components/responses/Unauthorized"),
			"403":     ref("#/components/responses/Forbidden"),
			"409":     errorResponse("A batch sent with this Idempotency-Key is still running, or ran and its answer was too large to keep or was lost with the instance that ran it (it will not run again under this key), or ran past its lease while another run of the key took over (this run is not charged: retry with the key for the answer).", "conflict"),
			"413":     ref("#/components/responses/TooLarge"),
			"422":     errorResponse("This Idempotency-Key was used for another request.", "idempotency_key_reused"),
			"429":     ref("#/components/responses/TooManyRequests"),
			"default": ref("#/components/responses/Error"),
		},
	}
	if a.Category != "" {
		op["tags"] = []string{a.Category}
	}
	return op
}

// requiredOf returns the required properties of a schema.
func requiredOf(schema map[string]any) []any {
	switch r := schema["required"].(type) {
	case []any:
		return r
	case []string:
		out := make([]any, len(r))
		for i, s := range r {
			out[i] = s
		}
		return out
	}
	return nil
}

// withoutDialect decodes a schema and drops its $schema, which the document sets once.
func withoutDialect(raw json.RawMessage) map[string]any {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return map[string]any{"type": "object"}
	}
	delete(m, "$schema")
	return m
}

func okResponse(data map[string]any, description string) map[string]any {
	r := edge.OpenAPIOK(data, description)
	r["headers"] = creditHeaders()
	return r
}

func creditHeaders() map[string]any {
	h := map[string]any{}
	for name, desc := range map[string]string{
		wire.HeaderCreditsCost:        "Credits this call spent.",
		wire.HeaderCreditsRemaining:   "Credits left: what is left of the period's allowance plus the grants.",
		wire.HeaderCreditsGranted:     "The part of the credits left that grants hold: they carry over when the allowance renews, until they lapse.",
		wire.HeaderCreditsUsed:        "Credits spent this period.",
		wire.HeaderCreditsLimit:       "The plan's monthly credits, the allowance that renews each period.",
		wire.HeaderPlan:               "The account's plan.",
		wire.HeaderRateLimit:          "Calls per minute the plan allows.",
		wire.HeaderRateLimitRemaining: "Calls that could be made now.",
	} {
		typ := "integer"
		if name == wire.HeaderPlan {
			typ = "string"
		}
		h[name] = map[string]any{"description": desc, "schema": map[string]any{"type": typ}}
	}
	h[wire.HeaderCreditsRenewal] = map[string]any{"description": "When the allowance renews; grants carry over.",
		"schema": map[string]any{"type": "string", "format": "date-time"}}
	return h
}

func errorResponse(description string, codes ...string) map[string]any {
	code := map[string]any{"type": "string"}
	field := map[string]any{"type": "string", "description": "The machine-readable cause, as in X-Error-Code."}
	if len(codes) > 0 {
		code["enum"], field["enum"] = codes, codes
	}
	schema := map[string]any{
		"type":     "object",
		"required": []string{"status", "error", "data", "code"},
		"properties": map[string]any{
			"status": map[string]any{"const": "error"},
			"error":  map[string]any{"type": "string", "description": "What went wrong, for people."},
			"data":   map[string]any{"type": "null"},
			"code":   field,
		},
	}
	return map[string]any{
		"description": description,
		"headers": map[string]any{
			wire.HeaderErrorCode: map[string]any{"description": "The machine-readable cause.", "schema": code},
		},
		"content": map[string]any{"application/json": map[string]any{"schema": schema}},
	}
}

func components() map[string]any {
	forbidden := errorResponse("A valid key whose scope, channel, IP allow-list, expiry or revocation (or its account's closure) blocks the call, or whose account the operator suspended (account_suspended: contact the operator; nothing is charged); or, with a text/html body, a request without a well-formed key, refused at the edge.", "forbidden", "account_suspended")
	forbidden["content"].(map[string]any)["text/html"] = map[string]any{"schema": map[string]any{"type": "string"}}
	tooMany := errorResponse("The plan refused the call; X-Error-Code tells why.", "rate_limited", "concurrency_limited", "credits_exhausted")
	tooMany["headers"].(map[string]any)["Retry-After"] = map[string]any{
		"description": "Seconds to wait, on rate and concurrency limits.", "schema": map[string]any{"type": "integer"}}
	return map[string]any{
		"securitySchemes": map[string]any{
			"apiKey": map[string]any{"type": "apiKey", "in": "header", "name": "x-api-key",
				"description": "The account's API key, a UUID."},
			"bearer": map[string]any{"type": "http", "scheme": "bearer",
				"description": "The API key as a bearer token, for clients that only support bearer auth."},
			"session": map[string]any{"type": "apiKey", "in": "header", "name": "x-jwt",
				"description": "A session token issued by the service (where the host enables sessions)."},
			"cookie": map[string]any{"type": "apiKey", "in": "cookie", "name": "__Host-tollgate-session",
				"description": "A browser's session cookie (named tollgate-session over plain HTTP), on the routes the host wraps with the session package's Cookies middleware. A request other than GET, HEAD or OPTIONS so authenticated needs the session's X-CSRF-Token header."},
		},
		"responses": map[string]any{
			"BadRequest":      errorResponse("A parameter is missing, unknown, mistyped or out of range (not charged), or the API judged a well-formed value wrong (charged).", "invalid_input", "rejected"),
			"Unauthorized":    errorResponse("The key matches no key of any account.", "unauthorized"),
			"Forbidden":       forbidden,
			"TooManyRequests": tooMany,
			"TooLarge":        errorResponse("The body or the file is too large.", "body_too_large"),
			"Error":           errorResponse("Any other failure: 404 unknown API, 405 wrong method, 415 wrong content type, 5xx on the service's side (refunded)."),
		},
	}
}
