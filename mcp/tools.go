package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
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
	for _, api := range apis {
		seen[api.ID] = true
		if h.tools[api.ID] == api {
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
	desc += fmt.Sprintf(" Costs %d credit%s per call.", api.Cost, plural(api.Cost))
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
// list down to the tools the caller's key may call, and gives every error a JSON-RPC
// code (the SDK would send a plain Go error with code 0).
func (h *Handler) middleware(next sdk.MethodHandler) sdk.MethodHandler {
	return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
		if method == "tools/call" {
			if params, ok := req.GetParams().(*sdk.CallToolParamsRaw); ok && !h.known(params.Name) {
				// Answered here rather than by the SDK, so that the key of a cached
				// principal is checked first, as for any other refused call.
				c := callerFrom(req)
				if c == nil {
					return nil, newRPCError(CodeUnauthorized, "unauthorized", "the request carries no credential")
				}
				p := c.p
				return nil, h.beforeRun(ctx, &p, newRPCError(codeInvalidParams, "not_found",
					fmt.Sprintf("unknown tool %q; tools/list lists the tools", params.Name)))
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
		if list, ok := res.(*sdk.ListToolsResult); ok {
			c := callerFrom(req)
			if c == nil {
				return nil, newRPCError(CodeUnauthorized, "unauthorized", "the request carries no credential")
			}
			list.Tools = slices.DeleteFunc(list.Tools, func(t *sdk.Tool) bool { return c.p.CheckAPI(t.Name) != nil })
		}
		return res, nil
	}
}

// known reports whether a tool of that name is in the catalog.
func (h *Handler) known(name string) bool {
	_, ok := h.svc.Catalog().Lookup(name)
	return ok
}

// callTool calls the API a tool stands for, through the service's pipeline: lookup,
// validation, admission, the call and its settlement. The API's failures, refused
// arguments and the plan's limits are tool results with isError, which the model can
// read; a refused key is a JSON-RPC error.
func (h *Handler) callTool(ctx context.Context, req *sdk.CallToolRequest) (*sdk.CallToolResult, error) {
	c := callerFrom(req)
	if c == nil {
		return nil, newRPCError(CodeUnauthorized, "unauthorized", "the request carries no credential")
	}
	principal := c.p // a copy: the pipeline may refresh it
	p := &principal
	api, err := h.svc.Lookup(p, req.Params.Name)
	if err != nil {
		// The API left the catalog since the tool was listed, or the key may not
		// call it: an unknown tool to this caller.
		return nil, h.beforeRun(ctx, p, newRPCError(codeInvalidParams, tollgate.CodeOf(err).String(), err.Error()))
	}
	args, err := decodeArgs(req.Params.Arguments)
	if err != nil {
		return nil, h.beforeRun(ctx, p, newRPCError(codeInvalidParams, "invalid_input", err.Error()))
	}
	if api.File != nil {
		if err := fileByURL(api, args); err != nil {
			return h.toolError(ctx, c, p, err, nil)
		}
	}
	inv, err := h.svc.Prepare(ctx, api, tollgate.Input{JSON: args})
	if err != nil {
		return h.toolError(ctx, c, p, err, nil)
	}
	results, rc, err := h.svc.Run(ctx, p, inv)
	if err != nil {
		return h.toolError(ctx, c, p, err, &rc)
	}
	res := results[0]
	if res.Err != nil {
		return h.toolError(ctx, c, p, res.Err, &rc)
	}
	c.receipt(&rc, 0)
	return &sdk.CallToolResult{
		Content:           []sdk.Content{&sdk.TextContent{Text: string(res.JSON)}},
		StructuredContent: json.RawMessage(res.JSON),
		Meta:              creditsMeta(&rc),
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

// beforeRun answers a call refused before admission with refusal, after checking the
// key of a cached principal as admission would have done, so that a rotated or revoked
// key gets its own answer.
func (h *Handler) beforeRun(ctx context.Context, p *tollgate.Principal, refusal *jsonrpc.Error) error {
	if err := h.svc.Verify(ctx, p); err != nil {
		return rpcErrorFor(h.pipelineError(ctx, err))
	}
	return refusal
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

// toolError turns a pipeline error of a call into a tool result with isError, whose
// text starts with the error's code, or into a JSON-RPC error when the key itself was
// refused. rc is the receipt when the call reached admission.
func (h *Handler) toolError(ctx context.Context, c *caller, p *tollgate.Principal, err error, rc *tollgate.Receipt) (*sdk.CallToolResult, error) {
	e := h.pipelineError(ctx, err)
	switch e.Code {
	case tollgate.CodeUnauthorized, tollgate.CodeForbidden, tollgate.CodeNoCredential, tollgate.CodeMalformedCredential:
		return nil, rpcErrorFor(e)
	}
	if rc == nil || !rc.HasBalance {
		// Refused before the ledger: report the balance as REST does, which also
		// checks the key of a cached principal that admission did not check.
		b, err := h.svc.Balance(ctx, p)
		if code := tollgate.CodeOf(err); err != nil && (code == tollgate.CodeUnauthorized || code == tollgate.CodeForbidden) {
			return nil, rpcErrorFor(h.pipelineError(ctx, err))
		}
		if err == nil {
			if rc == nil {
				rc = &tollgate.Receipt{Plan: p.Plan}
			}
			rc.Balance, rc.HasBalance = b, true
		}
	}
	c.receipt(rc, e.RetryAfter)
	text := e.Code.String() + ": " + e.Message
	if e.RetryAfter > 0 {
		text += fmt.Sprintf(" (retry in %ds)", int((e.RetryAfter+time.Second-1)/time.Second))
	}
	res := &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: text}}}
	if rc != nil {
		res.Meta = creditsMeta(rc)
	}
	return res, nil
}

// setReceiptHeaders writes the credit and rate headers of a call.
func setReceiptHeaders(hdr http.Header, rc *tollgate.Receipt) {
	if rc.HasBalance {
		billing.SetCreditHeaders(hdr, rc.Plan.Name, rc.Charged, rc.Balance)
	}
	if rc.HasRate {
		billing.SetRateHeaders(hdr, rc.Plan, rc.Rate)
	}
}

// creditsMeta reports a call's cost and the balance it left in a result's _meta, for
// clients that do not show HTTP headers.
func creditsMeta(rc *tollgate.Receipt) sdk.Meta {
	if !rc.HasBalance {
		return nil
	}
	b := rc.Balance
	m := map[string]any{
		"cost": rc.Charged, "remaining": b.Remaining, "used": b.Used, "limit": b.Allowance, "plan": rc.Plan.Name,
	}
	if !b.Period.End.IsZero() {
		m["renewal"] = b.Period.End.UTC().Format(time.RFC3339)
	}
	return sdk.Meta{MetaCredits: m}
}

func plural(n int64) string {
	if n == 1 {
		return ""
	}
	return "s"
}
