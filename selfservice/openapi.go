package selfservice

import (
	"maps"

	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/mgmtapi"
	"github.com/tollgate-dev/tollgate/internal/usagehttp"
)

// OpenAPIPaths returns the OpenAPI 3.1 path items of the self-service routes, for the
// REST front door's document (rest.OpenAPIInfo.Paths), which holds the components
// they refer to.
func OpenAPIPaths() map[string]any {
	keyID := map[string]any{"name": "key_id", "in": "path", "required": true,
		"description": "The key's id (not its value).", "schema": map[string]any{"type": "string", "maxLength": 64}}
	restrictions := func(description string) map[string]any {
		return map[string]any{"type": "object", "additionalProperties": false, "description": description,
			"properties": map[string]any{
				"apis":        map[string]any{"type": "array", "items": map[string]any{"type": "string"}},
				"channels":    map[string]any{"type": "array", "items": map[string]any{"enum": auth.ChannelNames()}},
				"allowed_ips": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": "CIDR prefixes or addresses."},
				"expires_at":  map[string]any{"type": "string", "format": "date-time"},
			}}
	}
	createBody := restrictions("The new key's name and restrictions, within the caller's key and the account.")
	createBody["required"] = []string{"name"}
	createBody["properties"].(map[string]any)["name"] = map[string]any{"type": "string", "minLength": 1, "maxLength": 64}
	updateBody := map[string]any{"type": "object", "additionalProperties": false, "minProperties": 1,
		"properties": map[string]any{
			"name":         map[string]any{"type": "string", "minLength": 1, "maxLength": 64},
			"restrictions": restrictions("The key's new restrictions: they replace the old ones and must be within them."),
		}}
	withKey := func(value bool) map[string]any {
		props := map[string]any{"key": keySchema()}
		required := []string{"key"}
		if value {
			props["value"] = map[string]any{"type": "string", "format": "uuid", "description": "The key's value, shown this once."}
			required = append(required, "value")
		}
		return map[string]any{"type": "object", "required": required, "properties": props}
	}
	keys := map[string]any{"type": "object", "properties": map[string]any{
		"keys": map[string]any{"type": "array", "items": keySchema(), "maxItems": auth.MaxKeyPage},
		"next": map[string]any{"type": []string{"string", "null"}, "description": "The cursor of the next page; null on the last."}}}
	op := func(id, summary string, data map[string]any, status string, extra ...string) map[string]any {
		responses := map[string]any{
			status:    edge.OpenAPIOK(data, summary),
			"401":     ref("#/components/responses/Unauthorized"),
			"403":     ref("#/components/responses/Forbidden"),
			"default": ref("#/components/responses/Error"),
		}
		for _, code := range extra {
			switch code {
			case "400":
				responses[code] = ref("#/components/responses/BadRequest")
			case "413":
				responses[code] = ref("#/components/responses/TooLarge")
			case "429":
				responses[code] = ref("#/components/responses/TooManyRequests")
			}
		}
		return map[string]any{
			"operationId": id, "summary": summary, "tags": []string{"Account"},
			"description": "Self-service: never billed, no rate-limit event. A sub-key manages keys only where the service allows it, and never a key wider than itself.",
			"security":    security(),
			"responses":   responses,
		}
	}
	withBody := func(o map[string]any, schema map[string]any) map[string]any {
		o["requestBody"] = map[string]any{"required": true,
			"content": map[string]any{"application/json": map[string]any{"schema": schema}}}
		return o
	}
	withParams := func(o map[string]any) map[string]any {
		o["parameters"] = []any{keyID}
		return o
	}
	audit := op("accountAudit", "The account's audit log, newest first", map[string]any{"type": "object", "properties": map[string]any{
		"entries": map[string]any{"type": "array", "items": map[string]any{"type": "object"}},
		"next":    map[string]any{"type": []string{"string", "null"}, "description": "The cursor of the next page."},
	}}, "200", "400")
	audit["parameters"] = []any{
		map[string]any{"name": "limit", "in": "query", "schema": map[string]any{"type": "integer", "minimum": 1, "maximum": 1000}},
		map[string]any{"name": "cursor", "in": "query", "schema": map[string]any{"type": "string", "maxLength": 64}},
		map[string]any{"name": "from", "in": "query", "schema": map[string]any{"type": "string", "format": "date-time"}},
		map[string]any{"name": "to", "in": "query", "schema": map[string]any{"type": "string", "format": "date-time"}},
	}
	listKeys := op("accountKeys", "A page of the keys of the account the caller may see, oldest first", keys, "200", "400")
	listKeys["parameters"] = []any{
		map[string]any{"name": "limit", "in": "query", "description": "The most keys on the page; 50 by default.",
			"schema": map[string]any{"type": "integer", "minimum": 1, "maximum": auth.MaxKeyPage}},
		map[string]any{"name": "cursor", "in": "query", "description": "The next of the page before.",
			"schema": map[string]any{"type": "string", "maxLength": 64}},
	}
	budget := " Creating, rotating and changing a key spend the account's self-service budget: beyond it, 429 with Retry-After."
	create := withBody(op("accountCreateKey", "Create a sub-key", withKey(true), "201", "400", "413", "429"), createBody)
	create["description"] = create["description"].(string) + budget +
		" The account holds at most a number of keys for self-service to create one (100 by default), counting the keys revoked within the service's retention (7 days by default): beyond it, 409."
	create["responses"].(map[string]any)["409"] = ref("#/components/responses/Error")
	update := withParams(withBody(op("accountUpdateKey", "Rename a sub-key or narrow its restrictions", withKey(false), "200", "400", "413", "429"), updateBody))
	update["description"] = update["description"].(string) + budget
	rotate := withParams(op("accountRotateKey", "Give a key a new value", withKey(true), "200", "429"))
	rotate["description"] = rotate["description"].(string) + budget
	use := op("accountUsage", "The account's usage over time", usagehttp.OpenAPISchema(), "200", "400")
	use["parameters"] = usagehttp.OpenAPIParameters()
	use["description"] = "Self-service: never billed, no rate-limit event. One series per group, a point per bucket that has calls, " +
		"with calls, credits, errors by code and latency percentiles; the same parameters and body as the time-series form of GET /v1/analytics. " +
		"The primary key (or a session acting as it) sees the whole account; a sub-key, or a session it started, only its own calls, and naming another key is a 403. " +
		"Bounds: 1 day by minute, 31 days by hour, 400 days by day; a bad parameter is a 400 whose message begins with its name; a service that records no usage answers 404."
	use["responses"].(map[string]any)["404"] = ref("#/components/responses/Error")
	paths := map[string]any{
		"/v1/account": map[string]any{"get": op("account", "The account, its plan and balance, and the first page of its keys",
			map[string]any{"type": "object", "properties": map[string]any{
				"account": map[string]any{"type": "object", "properties": map[string]any{
					"state": map[string]any{"enum": []string{"active", "suspended", "closed"},
						"description": "A suspended account's calls are refused (403 account_suspended) until the operator reactivates it; its holder still reads the account, its keys, usage and audit log, and revokes keys, but creates, rotates and changes none."},
					"state_changed_at": map[string]any{"type": []string{"string", "null"}, "format": "date-time"},
					"billing_anchor": map[string]any{"type": []string{"string", "null"}, "format": "date-time",
						"description": "When the account's credit periods are counted from: each renews on its day of the month (or of the year) at its time of day, in UTC. Null: calendar months."},
					"pending_plan": map[string]any{"type": []string{"string", "null"},
						"description": "The plan the account moves to at pending_plan_at, the end of the current period; null when no change waits."},
					"pending_plan_at": map[string]any{"type": []string{"string", "null"}, "format": "date-time"},
				}},
				"plan":      map[string]any{"type": "object"},
				"balance":   mgmtapi.BalanceSchema(),
				"keys":      map[string]any{"type": "array", "items": keySchema(), "maxItems": auth.DefaultKeyPage},
				"keys_next": map[string]any{"type": []string{"string", "null"}, "description": "The cursor of the next page of keys (GET /v1/account/keys?cursor=); null when keys are all of them."},
				"key_id":    map[string]any{"type": []string{"string", "null"}, "description": "The key the request authenticated with."},
			}}, "200")},
		"/v1/account/keys": map[string]any{
			"get":  listKeys,
			"post": create,
		},
		"/v1/account/keys/{key_id}": map[string]any{
			"patch":  update,
			"delete": withParams(op("accountDeleteKey", "Revoke a sub-key", withKey(false), "200")),
		},
		"/v1/account/keys/{key_id}/rotate": map[string]any{
			"post": rotate,
		},
		"/v1/account/keys/{key_id}/revoke": map[string]any{
			"post": withParams(op("accountRevokeKey", "Revoke a sub-key", withKey(false), "200")),
		},
		"/v1/account/audit": map[string]any{"get": audit},
		"/v1/account/usage": map[string]any{"get": use},
	}
	maps.Copy(paths, webhookPaths(op, withBody))
	return paths
}

func keySchema() map[string]any {
	str := map[string]any{"type": "string"}
	strs := map[string]any{"type": "array", "items": str}
	at := map[string]any{"type": "string", "format": "date-time"}
	return map[string]any{"type": "object", "description": "A key: never its value.",
		"required": []string{"id", "name", "primary", "created_at", "revoked"},
		"properties": map[string]any{
			"id": str, "account": str, "name": str, "primary": map[string]any{"type": "boolean"},
			"created_at": at, "rotated_at": at, "revoked": map[string]any{"type": "boolean"}, "revoked_at": at,
			"apis": strs, "channels": strs, "allowed_ips": strs,
			"expires_at": map[string]any{"type": []string{"string", "null"}, "format": "date-time"},
			"last_used": map[string]any{"type": []string{"string", "null"}, "format": "date-time",
				"description": "When the key was last used; null if never, or if the service records no usage. Only in the listings (GET /v1/account, GET /v1/account/keys)."},
		}}
}

func security() []any {
	return []any{map[string]any{"apiKey": []any{}}, map[string]any{"bearer": []any{}}, map[string]any{"session": []any{}}, map[string]any{"cookie": []any{}}}
}

func ref(to string) map[string]any { return map[string]any{"$ref": to} }
