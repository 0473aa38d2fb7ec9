package catalog

// The JSON Schema documents (draft 2020-12) that describe an API's input and result.
// They are built once, when the API is compiled, from plain maps so that encoding
// sorts their keys and the output is stable.

// SchemaDialect is the $schema of every JSON Schema that the catalog produces.
const SchemaDialect = "https://json-schema.org/draft/2020-12/schema"

// formatPatterns are the regular expressions that match what each Format accepts,
// for clients that check patterns but not formats.
var formatPatterns = map[Format]string{
	FormatEmail:    `^[^\s@]+@[^\s@]+\.[^\s@]+$`,
	FormatURL:      `^[Hh][Tt][Tt][Pp][Ss]?://\S+$`, // the scheme is case-insensitive
	FormatDate:     `^[0-9]{4}-[0-9]{2}-[0-9]{2}$`,
	FormatHexColor: `^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$`,
}

// jsonFormats maps a Format to the JSON Schema format annotation, where one exists.
var jsonFormats = map[Format]string{
	FormatEmail: "email",
	FormatURL:   "uri",
	FormatDate:  "date",
}

func inputSchema(a *API) map[string]any {
	s := objectSchema(a.compiled.params)
	s["$schema"] = SchemaDialect
	s["title"] = a.Title
	if a.Description != "" {
		s["description"] = a.Description
	}
	return s
}

func objectSchema(params []Param) map[string]any {
	props := make(map[string]any, len(params))
	required := []string{}
	for i := range params {
		p := &params[i]
		props[p.Name] = paramSchema(p)
		if p.Required {
			required = append(required, p.Name)
		}
	}
	s := map[string]any{
		"type":                 "object",
		"properties":           props,
		"additionalProperties": false,
	}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// paramSchema returns the JSON Schema of one parameter.
func paramSchema(p *Param) map[string]any {
	var s map[string]any
	switch p.Type {
	case Object:
		s = objectSchema(p.Fields)
	case Array:
		s = map[string]any{"type": "array", "items": paramSchema(p.Items)}
		if p.MinLength != nil {
			s["minItems"] = *p.MinLength
		}
		if p.MaxLength != nil {
			s["maxItems"] = *p.MaxLength
		}
	default:
		s = map[string]any{"type": string(p.Type)}
	}
	if p.Description != "" {
		s["description"] = p.Description
	}
	if p.Default != nil {
		s["default"] = p.Default
	}
	if p.Example != nil {
		s["examples"] = []any{p.Example}
	}
	if p.Enum != nil {
		s["enum"] = p.Enum
	}
	if p.Min != nil {
		s["minimum"] = *p.Min
	}
	if p.Max != nil {
		s["maximum"] = *p.Max
	}
	if p.Type == String {
		if p.MinLength != nil {
			s["minLength"] = *p.MinLength
		}
		if p.MaxLength != nil {
			s["maxLength"] = *p.MaxLength
		}
		if p.Required && (p.MinLength == nil || *p.MinLength < 1) {
			s["minLength"] = 1 // a required string must not be empty
		}
	}
	switch p.Format {
	case "":
	case FormatIP:
		s["anyOf"] = []any{map[string]any{"format": "ipv4"}, map[string]any{"format": "ipv6"}}
	default:
		if f := jsonFormats[p.Format]; f != "" {
			s["format"] = f
		}
		s["pattern"] = formatPatterns[p.Format]
	}
	return s
}

func resultSchema(a *API) map[string]any {
	var s map[string]any
	if len(a.Result) == 0 {
		s = map[string]any{"type": "object"}
	} else {
		s = fieldsSchema(a.Result)
	}
	s["$schema"] = SchemaDialect
	return s
}

func fieldsSchema(fields []Field) map[string]any {
	props := make(map[string]any, len(fields))
	for i := range fields {
		props[fields[i].Name] = fieldSchema(&fields[i])
	}
	return map[string]any{"type": "object", "properties": props}
}

func fieldSchema(f *Field) map[string]any {
	var s map[string]any
	switch f.Type {
	case JSON:
		s = map[string]any{}
	case Object:
		s = fieldsSchema(f.Fields)
	case Array:
		s = map[string]any{"type": "array", "items": fieldSchema(f.Items)}
	default:
		s = map[string]any{"type": string(f.Type)}
	}
	if f.Description != "" {
		s["description"] = f.Description
	}
	return s
}
