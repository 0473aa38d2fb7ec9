package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/reqlog"
	"github.com/tollgate-dev/tollgate/wire"
)

// MetaCost is the _meta key of a tool's credit cost, and MetaCredits that of the
// credit position a tool result reports (see the package documentation).
const (
	MetaCost    = "dev.tollgate/cost"
	MetaCredits = "dev.tollgate/credits"
)

// sync makes the server's tools those of the catalog's current version: it adds the
// APIs that are new or changed and removes those that are gone. The SDK tells the
// connected sessions with one tools/list_changed notification. It is cheap when
// nothing changed, so every request calls it, in case the catalog's notification is
// still on its way.
func (h *Handler) sync() {
	reg := h.svc.Catalog()
	if h.synced.Load() == reg.Version()+1 {
		return
	}
	h.toolsMu.Lock()
	defer h.toolsMu.Unlock()
	v := reg.Version()
	if h.synced.Load() == v+1 {
		return
	}
	apis := reg.List()
	seen := make(map[string]bool, len(apis))
	sizes := make(map[string]int64, len(apis))
	for _, api := range apis {
		seen[api.ID] = true
		if h.tools[api.ID] == api {
			sizes[api.ID] = (*h.toolSizes.Load())[api.ID]
			continue
		}
		tool, err := toolFor(api)
		if err != nil {
			h.log.Error("mcp: an API cannot be served as a tool", "api", api.ID, "error", err)
			delete(h.tools, api.ID)
			h.server.RemoveTools(api.ID)
			continue
		}
		h.server.AddTool(tool, h.callTool)
		h.tools[api.ID] = api
		sizes[api.ID] = encodedLen(tool)
	}
	var gone []string
	for id := range h.tools {
		if !seen[id] {
			gone = append(gone, id)
			delete(h.tools, id)
		}
	}
	if len(gone) > 0 {
		h.server.RemoveTools(gone...)
	}
	h.toolSizes.Store(&sizes)
	h.synced.Store(v + 1)
}

// toolFor describes an API as a tool: its id as the name, its description with the
// cost, its input schema and, when it declares result fields, its output schema.
func toolFor(api *catalog.API) (*sdk.Tool, error) {
	in := api.InputSchema()
	desc := api.Description
	if api.File != nil {
		var err error
		if in, err = urlOnlySchema(api); err != nil {
			return nil, err
		}
		desc += fmt.Sprintf(" Takes the file by address: pass its http(s) URL in url (%s, at most %d bytes) and the service fetches it; files cannot be uploaded over MCP.",
			strings.Join(api.File.Types, ", "), api.File.MaxBytes)
	}
	if api.Cost == 0 {
		desc += " Free: a call costs no credits."
	} else {
		desc += fmt.Sprintf(" Costs %d credit%s per call.", api.Cost, plural(api.Cost))
	}
	tool := &sdk.Tool{
		Name:        api.ID,
		Title:       api.Title,
		Description: desc,
		InputSchema: in,
		Meta:        sdk.Meta{MetaCost: api.Cost},
	}
	if len(api.Result) > 0 {
		tool.OutputSchema = api.ResultSchema()
	}
	return tool, nil
}

// urlOnlySchema returns the input schema of a file API in its URL form: the url
// parameter is required and says that it is the only way to pass the file.
func urlOnlySchema(api *catalog.API) (json.RawMessage, error) {
	var s map[string]any
	if err := json.Unmarshal(api.InputSchema(), &s); err != nil {
		return nil, err
	}
	props, _ := s["properties"].(map[string]any)
	u, _ := props[catalog.URLParam].(map[string]any)
	if u == nil {
		return nil, fmt.Errorf("the input schema of file API %s has no %s property", api.ID, catalog.URLParam)
	}
	u["description"] = "The http(s) address of the file, which the service fetches."
	req, _ := s["required"].([]any)
	s["required"] = append(req, catalog.URLParam)
	return json.Marshal(s)
}

// middleware runs around every MCP method the server receives: it filters the tool
// list down to the tools the caller's key may call, gives every error a JSON-RPC code
// (the SDK would send a plain Go error with code 0), binds a new session to its slot
// (sessions.go) and counts each result against the answer's budget (limits.go).
func (h *Handler) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		c := callerFrom(req)
		if c != nil && c.spent() {
			return nil, h.errAnswerSpent()
		}
		if method == "tools/call" {
			if params, ok := req.GetParams().(*sdk.CallToolParamsRaw); ok && !h.known(params.Name) {
				// Answered here rather than by the SDK, so that the key of a cached
				// principal is checked first, as for any other refused call.
				if c == nil {
					return nil, newRPCError(CodeUnauthorized, "unauthorized", "the request carries no credential")
				}
				refusal := newRPCError(codeInvalidParams, "not_found", fmt.Sprintf("unknown tool %q; tools/list lists the tools", params.Name))
				if c.rec != nil {
					ctx = reqlog.With(ctx, c.rec)
				}
				reply := h.svc.CallAll(ctx, c.as, func() ([]tollgate.Item, error) { return nil, refusal })
				return nil, h.rpcError(ctx, reply.Err)
			}
		}
		res, err := next(ctx, method, req)
		if err != nil {
			var wire *jsonrpc.Error
			if !errors.As(err, &wire) || wire.Code == 0 {
				if method == "initialize" || method == "notifications/initialized" {
					// The SDK's lifecycle checks: a message out of order is the client's
					// mistake, not the service's failure.
					h.log.InfoContext(ctx, "mcp: a lifecycle message out of order", "method", method, "error", err)
					return nil, newRPCError(codeInvalidRequest, "invalid_request", err.Error()+
						": a session begins with one initialize request, followed by one notifications/initialized")
				}
				h.log.WarnContext(ctx, "mcp: a method failed", "method", method, "error", err)
				return nil, newRPCError(codeInternal, "internal", "internal error: "+err.Error())
			}
			return nil, err
		}
		if c == nil {
			if _, ok := res.(*sdk.ListToolsResult); ok {
				return nil, newRPCError(CodeUnauthorized, "unauthorized", "the request carries no credential")
			}
			return res, nil
		}
		switch r := res.(type) {
		case *sdk.ListToolsResult:
			r.Tools = slices.DeleteFunc(r.Tools, func(t *sdk.Tool) bool { return c.p.CheckAPI(t.Name) != nil })
		case *sdk.InitializeResult:
			if ss, ok := req.GetSession().(*sdk.ServerSession); ok && c.slot != nil {
				h.sessions.bind(c.slot, ss, r.ProtocolVersion)
			}
		}
		if res != nil {
			if size := h.answerSize(res); !c.spend(size, h.limits.maxAnswer) {
				return h.answerTooLarge(res, size)
			}
		}
		return res, nil
	}
}

// known reports whether a tool of that name is in the catalog.
func (h *Handler) known(name string) bool {
	_, ok := h.svc.Catalog().Lookup(name)
	return ok
}

// callTool calls the API a tool stands for, through the service's call: lookup,
// validation, admission, the call and its settlement. The API's failures, refused
// arguments and the plan's limits are tool results with isError, which the model can
// read; an unknown tool, arguments that are not an object and a refused key are
// JSON-RPC errors.
func (h *Handler) callTool(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	c := callerFrom(req)
	if c == nil {
		return nil, newRPCError(CodeUnauthorized, "unauthorized", "the request carries no credential")
	}
	// The request was authenticated when it arrived (see ServeHTTP), for the session's
	// binding; its tool calls present that principal rather than authenticate again.
	if c.rec != nil {
		ctx = reqlog.With(ctx, c.rec)
	}
	reply := h.svc.Call(ctx, tollgate.Caller{As: &c.p}, req.Params.Name, func(api *catalog.API) (tollgate.Input, error) {
		args, err := decodeArgs(req.Params.Arguments)
		if err != nil {
			return tollgate.Input{}, newRPCError(codeInvalidParams, "invalid_input", err.Error())
		}
		if api.File != nil {
			if err := fileByURL(api, args); err != nil {
				return tollgate.Input{}, err
			}
		}
		return tollgate.Input{JSON: args}, nil
	})
	if reply.Err != nil {
		return h.toolError(ctx, c, reply.Err, &reply.Receipt)
	}
	if res := reply.Results[0]; res.Err != nil {
		return h.toolError(ctx, c, res.Err, &reply.Receipt)
	}
	res := reply.Results[0]
	c.receipt(&reply.Receipt, 0)
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: string(res.JSON)}},
		StructuredContent: json.RawMessage(res.JSON),
		Meta:              creditsMeta(&reply.Receipt),
	}, nil
}

// decodeArgs decodes a tool call's arguments: a JSON object, absent or null for none.
func decodeArgs(raw json.RawMessage) (map[string]any, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return map[string]any{}, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var args map[string]any
	if err := d.Decode(&args); err != nil || args == nil {
		return nil, errors.New("the arguments of a tool call must be a JSON object of parameters")
	}
	return args, nil
}

// fileByURL checks that a call to a file API passes its file by address, the only
// form MCP has, and explains the form when it does not.
func fileByURL(api *catalog.API, args map[string]any) error {
	if _, ok := args[api.File.Name]; ok {
		return &tollgate.Error{Code: tollgate.CodeInvalidInput, Message: fmt.Sprintf(
			"files cannot be uploaded over MCP: pass the address of the file in url instead of %s (or call POST /v1/%s over REST to upload it)", api.File.Name, api.ID)}
	}
	if _, ok := args[catalog.URLParam]; !ok {
		return &tollgate.Error{Code: tollgate.CodeInvalidInput, Message: fmt.Sprintf(
			"the %s tool needs the file's http(s) address in url (%s, at most %d bytes)", api.ID, strings.Join(api.File.Types, ", "), api.File.MaxBytes)}
	}
	return nil
}

// rpcError returns a refusal as a JSON-RPC error: the endpoint's own as it is, a
// failure of the service through the table of answers, and any other error, which the
// service does not make, as an internal error.
func (h *Handler) rpcError(ctx context.Context, err error) error {
	var own *jsonrpc.Error
	if errors.As(err, &own) {
		return own
	}
	return rpcErrorFor(h.pipelineError(ctx, err))
}

// pipelineError returns err as a pipeline error, logging any other error as internal.
func (h *Handler) pipelineError(ctx context.Context, err error) *tollgate.Error {
	var e *tollgate.Error
	if !errors.As(err, &e) {
		h.log.ErrorContext(ctx, "mcp: unexpected error", "error", err)
		e = &tollgate.Error{Code: tollgate.CodeInternal, Message: "internal error"}
	}
	return e
}

// toolError answers a tool call that failed or was refused: with a tool result with
// isError, whose text starts with the error's code, or with a JSON-RPC error when the
// table of answers says so (a refused key, an unknown tool) or when the endpoint
// refused the call itself.
func (h *Handler) toolError(ctx context.Context, c *caller, err error, rc *tollgate.Receipt) (*sdk.CallToolResult, error) {
	var own *jsonrpc.Error
	if errors.As(err, &own) {
		return nil, own
	}
	e := h.pipelineError(ctx, err)
	if errors.Is(e, auth.ErrAPINotAllowed) {
		// The key may not call the API: an unknown tool to this caller.
		return nil, newRPCError(codeInvalidParams, e.Code.String(), e.Message)
	}
	if answerOf(e.Code).rpc != 0 {
		c.refusedWith(e.Code.String(), rc)
		return nil, rpcErrorFor(e)
	}
	c.receipt(rc, e.RetryAfter)
	text := e.Code.String() + ": " + e.Message
	if e.RetryAfter > 0 {
		text += fmt.Sprintf(" (retry in %ds)", int((e.RetryAfter+time.Second-1)/time.Second))
	}
	return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}, Meta: creditsMeta(rc)}, nil
}

// refusedWith reports a tool call refused with a JSON-RPC error in the HTTP answer's
// headers: its receipt's credit headers, and name, the cause, in X-Error-Code (the
// first cause, for a batch that carries several refusals).
func (c *caller) refusedWith(name string, rc *tollgate.Receipt) {
	c.receipt(rc, 0)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.done && c.hdr != nil && c.hdr.Get(wire.HeaderErrorCode) == "" {
		c.hdr[wire.HeaderErrorCode] = []string{name}
	}
}

// creditsMeta reports a call's cost and the balance it left in a result's _meta, for
// clients that do not show HTTP headers.
func creditsMeta(rc *tollgate.Receipt) sdk.Meta {
	if rc.Balance == (billing.Balance{}) {
		return nil
	}
	b := rc.Balance
	c := &credits{Cost: rc.Charged, Limit: b.Allowance, Plan: rc.Plan.Name, Remaining: b.Remaining, Used: b.Used}
	if !b.Period.End.IsZero() {
		c.Renewal = b.Period.End.UTC().Format(time.RFC3339)
	}
	return sdk.Meta{MetaCredits: c}
}

// credits is the credit position of a tool result, under [MetaCredits]. A struct
// rather than a map: it encodes without reflecting over map keys and sorting them, on
// every call's path. Its fields are in the order of their names, as a map's would be.
type credits struct {
	Cost      int64  `json:"cost"`
	Limit     int64  `json:"limit"`
	Plan      string `json:"plan"`
	Remaining int64  `json:"remaining"`
	Renewal   string `json:"renewal,omitempty"` // RFC 3339; absent when the period is not known
	Used      int64  `json:"used"`
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
