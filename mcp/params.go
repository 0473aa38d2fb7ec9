package mcp

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tollgate-dev/tollgate/internal/jsonfield"
)

// The SDK answers params whose fields have values of the wrong type with encoding's
// own words, which name its Go types ("unmarshaling ... into a *mcp.CallToolParamsRaw:
// json: cannot unmarshal ... into Go struct field mcp.CallToolParamsRaw.name of type
// string"), and it decodes them before any middleware runs. The handler checks the
// top-level fields of the params of the SDK's methods itself, as the SDK reads them
// (by their exact names; a field of another case is ignored), and refuses a value of
// the wrong type with a message that names the field and what it must be.

// paramTypes are the SDK's types of the params of the methods a server serves.
var paramTypes = map[string]reflect.Type{
	methodInitialize:           reflect.TypeFor[sdk.InitializeParams](),
	methodCallTool:             reflect.TypeFor[sdk.CallToolParamsRaw](),
	"ping":                     reflect.TypeFor[sdk.PingParams](),
	"tools/list":               reflect.TypeFor[sdk.ListToolsParams](),
	"prompts/list":             reflect.TypeFor[sdk.ListPromptsParams](),
	"prompts/get":              reflect.TypeFor[sdk.GetPromptParams](),
	"resources/list":           reflect.TypeFor[sdk.ListResourcesParams](),
	"resources/templates/list": reflect.TypeFor[sdk.ListResourceTemplatesParams](),
	"resources/read":           reflect.TypeFor[sdk.ReadResourceParams](),
	"resources/subscribe":      reflect.TypeFor[sdk.SubscribeParams](),
	"resources/unsubscribe":    reflect.TypeFor[sdk.UnsubscribeParams](),
	//lint:ignore SA1019 the SDK serves the deprecated method still, reading its params with this type
	"logging/setLevel":          reflect.TypeFor[sdk.SetLoggingLevelParams](),
	"completion/complete":       reflect.TypeFor[sdk.CompleteParams](),
	"notifications/initialized": reflect.TypeFor[sdk.InitializedParams](),
	"notifications/cancelled":   reflect.TypeFor[sdk.CancelledParams](),
	"notifications/progress":    reflect.TypeFor[sdk.ProgressNotificationParams](),
	//lint:ignore SA1019 the SDK serves the deprecated method still, reading its params with this type
	"notifications/roots/list_changed": reflect.TypeFor[sdk.RootsListChangedParams](),
}

// paramsMisuse returns why the params of m (an object) cannot be the params of its
// method: a top-level field whose value has the wrong type. It returns "" for params
// it finds nothing wrong with, which the SDK then reads.
func paramsMisuse(m message) string {
	t, ok := paramTypes[m.method]
	if !ok || len(m.params) == 0 {
		return ""
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(m.params, &fields) != nil {
		return ""
	}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		raw, ok := fields[name]
		if name == "" || name == "-" || !ok || string(raw) == "null" {
			continue
		}
		if why := fieldMisuse(f.Type, raw); why != "" {
			return fmt.Sprintf("the params of %s: %s %s", quote(m.method), name, why)
		}
	}
	return ""
}

// fieldMisuse returns why raw cannot be a value of type t, or "". An object (a struct
// or a map) or an array of objects is only checked to be an object or an array: the
// SDK reads their fields by their exact names, and encoding/json would read them in
// any case. Raw JSON (json.RawMessage) and values of any type are the SDK's to judge.
func fieldMisuse(t reflect.Type, raw json.RawMessage) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[json.RawMessage]() || t.Kind() == reflect.Interface {
		return ""
	}
	wrong := func() string {
		return fmt.Sprintf("must be %s, not %s", jsonfield.Describe(t), jsonfield.Words(jsonfield.Given(raw)))
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		if raw[0] != '{' && !reflect.PointerTo(t).Implements(reflect.TypeFor[json.Unmarshaler]()) {
			return wrong()
		}
		return ""
	case reflect.Slice, reflect.Array:
		if raw[0] != '[' {
			return wrong()
		}
		if e := t.Elem(); e.Kind() == reflect.Struct || e.Kind() == reflect.Map || e.Kind() == reflect.Pointer {
			return ""
		}
		if json.Unmarshal(raw, reflect.New(t).Interface()) != nil {
			return fmt.Sprintf("must be %s: an item is not", jsonfield.Describe(t))
		}
		return ""
	}
	if json.Unmarshal(raw, reflect.New(t).Interface()) != nil {
		return wrong()
	}
	return ""
}
