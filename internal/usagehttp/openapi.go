package usagehttp

import "github.com/tollgate-dev/tollgate/auth"

// OpenAPIParameters returns the OpenAPI 3.1 parameter objects of a usage query.
func OpenAPIParameters() []any {
	param := func(name, description string, schema map[string]any) any {
		return map[string]any{"name": name, "in": "query", "required": false, "description": description, "schema": schema}
	}
	str := map[string]any{"type": "string", "maxLength": 256}
	return []any{
		param("from", "Start of the range, RFC 3339 or a date (UTC); the default is `to` less 30 days (day), 24 hours (hour) or 1 hour (minute).", map[string]any{"type": "string"}),
		param("to", "End of the range, exclusive, RFC 3339 or a date (UTC); the default is now.", map[string]any{"type": "string"}),
		param("interval", "Width of a point.", map[string]any{"type": "string", "enum": []string{"minute", "hour", "day"}, "default": "day"}),
		param("by", "What the series are grouped by.", map[string]any{"type": "string", "enum": []string{"none", "api", "key", "channel", "outcome"}, "default": "none"}),
		param("api", "Only the calls of this API.", str),
		param("key", "Only the calls of this key id.", str),
		param("channel", "Only the calls over this channel.", map[string]any{"type": "string", "enum": auth.ChannelNames()}),
	}
}

// OpenAPISchema returns the JSON Schema of [Body].
func OpenAPISchema() map[string]any {
	at := map[string]any{"type": "string", "format": "date-time"}
	count := map[string]any{"type": "integer", "minimum": 0}
	point := map[string]any{"type": "object", "required": []string{"start", "calls", "credits", "errors", "latency_ms"},
		"properties": map[string]any{
			"start": at, "calls": count, "credits": count,
			"errors": map[string]any{"type": "object", "additionalProperties": count,
				"description": "The calls that did not succeed, by error code."},
			"latency_ms": map[string]any{"type": []string{"object", "null"},
				"description": "Latency percentiles in milliseconds, estimates within 9.1%; null when no call of the point ran.",
				"properties": map[string]any{
					"p50": map[string]any{"type": "number"}, "p95": map[string]any{"type": "number"}, "p99": map[string]any{"type": "number"},
				}},
		}}
	return map[string]any{"type": "object", "required": []string{"account", "from", "to", "interval", "by", "key", "series"},
		"properties": map[string]any{
			"account": map[string]any{"type": "string"}, "from": at, "to": at,
			"interval": map[string]any{"enum": []string{"minute", "hour", "day"}},
			"by":       map[string]any{"enum": []string{"none", "api", "key", "channel", "outcome"}},
			"key":      map[string]any{"type": []string{"string", "null"}, "description": "The key filter; null for none."},
			"series": map[string]any{"type": "array", "description": "One series per group that has calls.",
				"items": map[string]any{"type": "object", "required": []string{"group", "points"},
					"properties": map[string]any{
						"group":  map[string]any{"type": "string"},
						"points": map[string]any{"type": "array", "items": point, "description": "A point per bucket that has calls, oldest first."},
					}}},
		}}
}
