package session

import "github.com/tollgate-dev/tollgate/edge"

// OpenAPIPaths returns the OpenAPI 3.1 path item of the session routes
// (/v1/account/session), for the REST front door's document (rest.OpenAPIInfo.Paths),
// which holds the components they refer to. Merge it with the self-service routes'
// (selfservice.OpenAPIPaths) when both are mounted.
func OpenAPIPaths() map[string]any {
	str := map[string]any{"type": "string"}
	info := func(token bool) map[string]any {
		props := map[string]any{
			"session_id": str, "account": str,
			"key_id":     map[string]any{"type": "string", "description": "The key that started the session; empty for a session started through the host's sign-in."},
			"expires_at": map[string]any{"type": "string", "format": "date-time"},
			"csrf_token": map[string]any{"type": "string", "description": "The value of the " + CSRFHeader + " header that a cookie request other than GET needs."},
		}
		if token {
			props["token"] = map[string]any{"type": "string",
				"description": `The session token, to send as x-jwt; only when the body asked for kind "token" (then no cookie is set and csrf_token is left out).`}
		}
		return map[string]any{"type": "object", "required": []string{"session_id", "account", "key_id", "expires_at"}, "properties": props}
	}
	ref := func(name string) map[string]any { return map[string]any{"$ref": "#/components/responses/" + name} }
	op := func(id, summary, description string, data map[string]any, status string, security []any) map[string]any {
		return map[string]any{
			"operationId": id, "summary": summary, "description": description, "tags": []string{"Account"},
			"security": security,
			"responses": map[string]any{
				status:    edge.OpenAPIOK(data, summary),
				"401":     ref("Unauthorized"),
				"403":     ref("Forbidden"),
				"default": ref("Error"),
			},
		}
	}
	byKey := []any{map[string]any{"apiKey": []any{}}, map[string]any{"bearer": []any{}}, map[string]any{}}
	bySession := []any{map[string]any{"session": []any{}}, map[string]any{"cookie": []any{}}}
	start := op("sessionStart", "Start a session",
		"Starts a session with the API key in x-api-key, Authorization: Bearer or the body's api_key; without a key, the host's sign-in decides, where it has one. "+
			`kind "cookie" (the default) sets the HttpOnly, SameSite=Strict session cookie and answers the CSRF token; kind "token" answers the session token for x-jwt instead. `+
			"A session started with a sub-key has that key's rights, never more; rotating or revoking the key ends the session. Refused from another origin's page. "+
			"Each start spends one event of the account's self-service budget: beyond it, 429 with Retry-After.",
		info(true), "201", byKey)
	start["requestBody"] = map[string]any{"required": false, "content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
		"type": "object", "properties": map[string]any{
			"api_key": map[string]any{"type": "string", "format": "uuid", "description": "The API key, for a sign-in form; a key in a header takes precedence."},
			"kind":    map[string]any{"enum": []string{"cookie", "token"}, "default": "cookie"},
		}}}}}
	responses := start["responses"].(map[string]any)
	responses["400"], responses["413"], responses["429"] = ref("BadRequest"), ref("TooLarge"), ref("TooManyRequests")
	end := op("sessionEnd", "Sign out",
		"Ends the session on every instance and clears the cookie. With the cookie, it needs the "+CSRFHeader+" header. An expired session is answered as ended. Signing out is never refused for the account's self-service budget.",
		map[string]any{"type": "object", "properties": map[string]any{"ended": map[string]any{"type": "boolean"}}}, "200", bySession)
	return map[string]any{"/v1/account/session": map[string]any{
		"post": start,
		"get": op("sessionCurrent", "The current session",
			"The session the request carries (x-jwt or the cookie), with its CSRF token.", info(false), "200", bySession),
		"delete": end,
	}}
}
