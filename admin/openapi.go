package admin

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/mgmtapi"
	"github.com/tollgate-dev/tollgate/usage"
	"github.com/tollgate-dev/tollgate/wire"
)

// OpenAPIPath is where the handler serves its OpenAPI document ([OpenAPI]), to any
// caller: the document names no secret, so it needs no admin token.
const OpenAPIPath = "/admin/v1/openapi.json"

// OpenAPI returns the OpenAPI 3.1 document of the admin API: every route with its path
// and query parameters and their bounds, its JSON body, its answers in the envelope
// (the data of each success, and each error status it may answer), and the admin token
// as a bearer security scheme. The handler serves it at [OpenAPIPath]; a host may
// publish it elsewhere as well. Key values appear only where they are created: the
// "value" of account creation, key creation and rotation.
func OpenAPI() map[string]any {
	paths := openAPIPaths()
	maps.Copy(paths, webhookPaths())
	return map[string]any{
		"openapi":           "3.1.0",
		"jsonSchemaDialect": catalog.SchemaDialect,
		"info": map[string]any{
			"title":   "Tollgate admin API",
			"version": "1.0.0",
			"description": "The operators' API of a Tollgate service: accounts and their lifecycle, keys, credits, the audit log, " +
				"the usage of every account, and webhook endpoints. Every route but this document needs the admin token, sent as " +
				"Authorization: Bearer <token>. Answers are JSON in the envelope: {\"status\":\"ok\",\"error\":null,\"data\":...} " +
				"on success, {\"status\":\"error\",\"error\":message,\"data\":null,\"code\":code} on failure, the code also in X-Error-Code. " +
				"The API answers no cross-origin call. A GET route answers HEAD as well.",
		},
		"servers":  []any{map[string]any{"url": "/"}},
		"security": []any{map[string]any{"adminToken": []any{}}},
		"tags": []any{
			tag("Accounts", "Accounts, their plans and their lifecycle: suspension, closure, deletion."),
			tag("Keys", "An account's keys: creation, rotation, revocation. A key's value is shown only when it is created."),
			tag("Credits", "Grants of credits, and credits taken away."),
			tag("Audit", "Every change to an account, who made it and from where."),
			tag("Usage", "The usage of every account, ranked."),
			tag("Webhooks", "Webhook endpoints: the operator's own, which receive the events of every account, and the accounts'. "+
				"A secret is shown only when it is created or rotated."),
			tag("Document", "This document."),
		},
		"paths":      paths,
		"components": openAPIComponents(),
	}
}

func tag(name, description string) map[string]any {
	return map[string]any{"name": name, "description": description}
}

func ref(to string) map[string]any { return map[string]any{"$ref": to} }

// schema returns a reference to a schema of the components.
func schema(name string) map[string]any { return ref("#/components/schemas/" + name) }

// An op describes an operation for [operation]: its answers are the success status
// with data, the errors listed, and 401, 405 and 500 (as default) on every route.
type op struct {
	id, tag, summary, description string
	status                        string         // the success status: "200" or "201"
	data                          map[string]any // the success's data
	params                        []any
	body                          map[string]any // the request body's schema, nil for none
	bodyRequired                  bool
	example                       map[string]any // an example of the body
	errors                        []string       // the error statuses besides 401 and 405
	more                          map[string]any // further responses, by status
}

// operation returns the OpenAPI operation that o describes. A route with a body
// answers 413 and 415 as well.
func operation(o op) map[string]any {
	responses := map[string]any{
		o.status:  okResponse(o.data, o.summary+"."),
		"401":     ref("#/components/responses/Unauthorized"),
		"405":     ref("#/components/responses/MethodNotAllowed"),
		"default": ref("#/components/responses/Error"),
	}
	errs := o.errors
	if o.body != nil {
		errs = slices.Concat(errs, []string{"413", "415"})
	}
	for _, status := range errs {
		responses[status] = ref("#/components/responses/" + errorResponses[status])
	}
	maps.Copy(responses, o.more)
	out := map[string]any{
		"operationId": o.id, "summary": o.summary, "description": o.description,
		"tags": []string{o.tag}, "responses": responses,
	}
	if o.params != nil {
		out["parameters"] = o.params
	}
	if o.body != nil {
		media := map[string]any{"schema": o.body}
		if o.example != nil {
			media["example"] = o.example
		}
		out["requestBody"] = map[string]any{"required": o.bodyRequired,
			"content": map[string]any{"application/json": media}}
	}
	return out
}

// errorResponses names the component of each error status.
var errorResponses = map[string]string{
	"400": "BadRequest", "404": "NotFound", "409": "Conflict", "413": "TooLarge",
	"415": "UnsupportedMediaType", "503": "Unavailable",
}

// okResponse is a success in the envelope around data.
func okResponse(data map[string]any, description string) map[string]any {
	return map[string]any{
		"description": description,
		"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
			"type": "object", "required": []string{"status", "error", "data"},
			"properties": map[string]any{
				"status": map[string]any{"const": "ok"},
				"error":  map[string]any{"type": "null"},
				"data":   data,
			},
		}}},
	}
}

// object returns the schema of an object with the given properties, all required but
// those named in optional.
func object(props map[string]any, optional ...string) map[string]any {
	var required []string
	for name := range props {
		if !slices.Contains(optional, name) {
			required = append(required, name)
		}
	}
	slices.Sort(required)
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

func str(description string) map[string]any {
	return map[string]any{"type": "string", "description": description}
}

func nullable(typ, description string) map[string]any {
	return map[string]any{"type": []string{typ, "null"}, "description": description}
}

func nullableInstant(description string) map[string]any {
	s := nullable("string", description)
	s["format"] = "date-time"
	return s
}

func instant(description string) map[string]any {
	return map[string]any{"type": "string", "format": "date-time", "description": description}
}

func count(description string) map[string]any {
	return map[string]any{"type": "integer", "minimum": 0, "description": description}
}

// cursorParam is the cursor parameter of a listing, at most max bytes.
func cursorParam(max int) map[string]any {
	return queryParam("cursor", "The next of the page before, as it is.", map[string]any{"type": "string", "maxLength": max})
}

// limitParam is the limit parameter of a listing: 1 to max, def by default.
func limitParam(def, max int) map[string]any {
	return queryParam("limit", "The most items a page holds.", map[string]any{"type": "integer", "minimum": 1, "maximum": max, "default": def})
}

func queryParam(name, description string, s map[string]any) map[string]any {
	return map[string]any{"name": name, "in": "query", "required": false, "description": description, "schema": s}
}

// unknownParams ends the description of a route with query parameters.
const unknownParams = " A query parameter that is unknown or given more than once is refused (400), as is one out of its bounds; the message names it."

// page returns the data of a page of a listing: the items under name, and next.
func page(name string, items map[string]any, maxItems int, description string) map[string]any {
	return object(map[string]any{
		name:   map[string]any{"type": "array", "items": items, "maxItems": maxItems, "description": description},
		"next": nullable("string", "The cursor of the next page; null on the last."),
	})
}

// restrictionProps are the properties of the restrictions of a new account or key.
func restrictionProps() map[string]any {
	return map[string]any{
		"apis": map[string]any{"type": "array", "description": "The APIs the keys may call; none: every API.",
			"items": map[string]any{"type": "string", "pattern": "^[a-z0-9-]{1,64}$"}},
		"channels": map[string]any{"type": "array", "description": "The channels the keys may call by; none: every channel.",
			"items": map[string]any{"type": "string", "enum": auth.ChannelNames()}},
		"allowed_ips": map[string]any{"type": "array", "description": "The addresses the keys may call from: addresses or CIDR prefixes (10.0.0.0/8); none: any address.",
			"items": map[string]any{"type": "string"}},
		"expires_at": instant("When the keys stop working; absent: never."),
	}
}

// reasonSchema is the schema of a reason, required (not blank) or not.
func reasonSchema(required bool, description string) map[string]any {
	s := map[string]any{"type": "string", "maxLength": 500, "description": description + " At most 500 characters of printable text."}
	if required {
		s["pattern"] = `\S`
	}
	return s
}

func openAPIPaths() map[string]any {
	accountID := ref("#/components/parameters/AccountID")
	keyID := ref("#/components/parameters/KeyID")
	account, key, balance := schema("Account"), schema("Key"), schema("Balance")
	keyWithValue := func(created bool) map[string]any {
		props := map[string]any{"key": key, "value": map[string]any{"type": "string", "format": "uuid",
			"description": "The key's value, shown this once: it is not stored and cannot be read again."}}
		if created {
			return object(props)
		}
		delete(props, "value")
		return object(props)
	}
	accountBody := object(restrictionProps(), "apis", "channels", "allowed_ips", "expires_at")
	accountBody["description"] = "The account, its plan and opening credits, and restrictions that confine every key of it."
	props := accountBody["properties"].(map[string]any)
	props["id"] = map[string]any{"type": "string", "maxLength": 64, "pattern": "^[A-Za-z0-9_-]*$",
		"description": "The account's id: letters, digits, _ and -. Absent or empty: one is generated."}
	props["plan"] = map[string]any{"type": "string", "minLength": 1, "description": "One of the plans (GET /admin/v1/plans)."}
	props["credits"] = map[string]any{"type": "integer", "minimum": 0, "maximum": billing.MaxCredits,
		"description": "The opening balance; absent: the plan's allowance."}
	props["billing_anchor"] = instant("When the account's credit periods are counted from (RFC 3339, from 1970 to a year from now; " +
		"kept to the second): each renews on its day of the month, or of the year, at its time of day (UTC). Absent: the creation.")
	accountBody["required"] = []string{"plan"}
	accountBody["additionalProperties"] = false

	keyBody := object(restrictionProps(), "apis", "channels", "allowed_ips", "expires_at")
	keyBody["properties"].(map[string]any)["name"] = map[string]any{"type": "string", "minLength": 1, "maxLength": 64, "pattern": `\S`,
		"description": "The key's name, 1 to 64 characters (trimmed)."}
	keyBody["required"] = []string{"name"}
	keyBody["additionalProperties"] = false
	keyBody["description"] = "The key's name, and restrictions within the account's."

	creditsBody := map[string]any{"type": "object", "required": []string{"amount", "reason"}, "additionalProperties": false,
		"properties": map[string]any{
			"amount": map[string]any{"type": "integer", "minimum": -billing.MaxCredits, "maximum": billing.MaxCredits, "not": map[string]any{"const": 0},
				"description": "Credits to grant (positive) or take away (negative: the allowance first, then the grants; never below zero)."},
			"reason":     reasonSchema(true, "Why the balance changes, recorded in the audit log."),
			"expires_at": instant("When a grant lapses: in the future, at most ten years ahead; absent: never. Only for a positive amount."),
		}}
	stateBody := func(required bool, description string) map[string]any {
		s := map[string]any{"type": "object", "additionalProperties": false,
			"properties": map[string]any{"reason": reasonSchema(required, description)}}
		if required {
			s["required"] = []string{"reason"}
		}
		return s
	}
	stateOp := func(id, summary, description string, required bool) map[string]any {
		description += " An account that kept changing while it was being changed is a 409: read it again and retry."
		return map[string]any{"post": operation(op{id: id, tag: "Accounts", summary: summary, description: description,
			status: "200", data: object(map[string]any{"account": account}), params: []any{accountID},
			body: stateBody(required, "Why, recorded in the audit log."), bodyRequired: required,
			example: map[string]any{"reason": "unpaid invoice"}, errors: []string{"400", "404", "409", "503"}})}
	}

	auditEntry := schema("AuditEntry")
	usageData := schema("UsagePage")
	channels := append(auth.ChannelNames(), "other")
	outcomes := []string{usage.OK}
	for _, c := range tollgate.Codes() {
		outcomes = append(outcomes, c.String())
	}
	instantOrDate := map[string]any{"type": "string", "anyOf": []any{
		map[string]any{"format": "date-time"}, map[string]any{"format": "date"}}}

	documentSchema := object(map[string]any{
		"openapi": map[string]any{"type": "string", "pattern": `^3\.1\.`}, "info": map[string]any{"type": "object"},
		"paths": map[string]any{"type": "object"}})
	documentSchema["additionalProperties"] = true
	return map[string]any{
		OpenAPIPath: map[string]any{"get": map[string]any{
			"operationId": "adminOpenAPI", "summary": "This document", "tags": []string{"Document"},
			"description": "The OpenAPI 3.1 document of the admin API. It needs no token: it names no secret. " +
				"It carries a strong ETag: a request with If-None-Match naming it is answered 304.",
			"security": []any{},
			"responses": map[string]any{
				"200": map[string]any{"description": "The document.",
					"headers": map[string]any{
						"ETag":          map[string]any{"required": true, "description": "The document's strong entity tag.", "schema": map[string]any{"type": "string"}},
						"Cache-Control": map[string]any{"required": true, "description": "no-cache: revalidate with If-None-Match.", "schema": map[string]any{"type": "string"}},
					},
					"content": map[string]any{"application/json": map[string]any{"schema": documentSchema}}},
				"304": map[string]any{"description": "The document has the ETag that If-None-Match names."},
				"405": ref("#/components/responses/MethodNotAllowed"),
			},
		}},
		"/admin/v1/plans": map[string]any{"get": operation(op{id: "adminListPlans", tag: "Accounts",
			summary: "The plans an account may be on", description: "Sorted by name.", status: "200",
			data: object(map[string]any{"plans": map[string]any{"type": "array", "items": schema("Plan")}})})},
		"/admin/v1/accounts": map[string]any{
			"get": operation(op{id: "adminListAccounts", tag: "Accounts", summary: "A page of the accounts",
				description: "The accounts in the order of their ids. A page may hold fewer accounts than the limit, even none, " +
					"while next is set: the store bounds what one page examines; go on until next is null." + unknownParams,
				status: "200", data: page("accounts", account, auth.MaxAccountPage, "The page's accounts."),
				params: []any{
					limitParam(auth.DefaultAccountPage, auth.MaxAccountPage), cursorParam(64),
					queryParam("plan", "Only the accounts on this plan.", map[string]any{"type": "string", "maxLength": 64}),
					queryParam("state", "Only the accounts in this state.", map[string]any{"type": "string", "enum": []string{
						string(auth.AccountActive), string(auth.AccountSuspended), string(auth.AccountClosed)}}),
					queryParam("created_from", "Only the accounts created at or after it (RFC 3339).", map[string]any{"type": "string", "format": "date-time"}),
					queryParam("created_before", "Only the accounts created before it (RFC 3339); after created_from.", map[string]any{"type": "string", "format": "date-time"}),
					queryParam("id_prefix", "Only the accounts whose id begins with it.", map[string]any{"type": "string", "maxLength": 64}),
				},
				errors: []string{"400", "503"}}),
			"post": operation(op{id: "adminCreateAccount", tag: "Accounts", summary: "Create an account and its primary key",
				description: "The primary key's value is in value, shown only this once. Creation is idempotent: sent again for an id " +
					"that exists with the same plan and restrictions, it answers 200 with the account as it is, created false and no value " +
					"(the opening credits are not compared); with another definition, or for the id of a deleted account, 409 saying what differs.",
				status: "201", data: object(map[string]any{"account": account, "key": key,
					"value":   map[string]any{"type": "string", "format": "uuid", "description": "The primary key's value, shown this once."},
					"created": map[string]any{"const": true}}),
				more: map[string]any{"200": okResponse(object(map[string]any{"account": account, "key": key, "created": map[string]any{"const": false}}),
					"The account existed with this definition: it is answered as it is, without a value.")},
				body: accountBody, bodyRequired: true, example: map[string]any{"id": "acme", "plan": "pro"},
				errors: []string{"400", "409", "503"}}),
		},
		"/admin/v1/accounts/{account_id}": map[string]any{
			"get": operation(op{id: "adminGetAccount", tag: "Accounts", summary: "An account, its balance and the first page of its keys",
				description: "keys_next continues the keys (GET /admin/v1/accounts/{account_id}/keys?cursor=).", status: "200",
				data: object(map[string]any{"account": account, "balance": balance,
					"keys":      map[string]any{"type": "array", "items": key, "maxItems": auth.DefaultKeyPage},
					"keys_next": nullable("string", "The cursor of the next page of keys; null when keys are all of them.")}),
				params: []any{accountID}, errors: []string{"400", "404", "503"}}),
			"patch": operation(op{id: "adminChangePlan", tag: "Accounts", summary: "Change an account's plan",
				description: "Now, or at the renewal (the end of the current period); by default now for an upgrade (a plan with more credits) " +
					"and at the renewal otherwise. A change now is in force from the account's next call and changes what is left of the " +
					"period's allowance by the difference of the allowances (never below zero, never the granted credits, never what calls " +
					"in flight hold), once, whatever the order in which changes made at once reach the ledger; between plans " +
					"that renew on different cycles a new period begins now. A change at the renewal shows in pending_plan and " +
					"pending_plan_at until then; a later change replaces it, and a change to the plan in force drops it. A change that " +
					"is already made, or already waits, changes nothing (changed false). A closed account's plan cannot change (409).",
				status: "200", data: object(map[string]any{"account": account, "balance": balance,
					"changed":      map[string]any{"type": "boolean", "description": "Whether anything changed."},
					"effective_at": nullableInstant("When the new plan takes effect: now, or the renewal; null when nothing changed.")}),
				params: []any{accountID},
				body: map[string]any{"type": "object", "required": []string{"plan"}, "additionalProperties": false,
					"description": "The plan to move the account to, and when.",
					"properties": map[string]any{
						"plan": map[string]any{"type": "string", "minLength": 1, "pattern": `\S`, "description": "One of the plans (GET /admin/v1/plans)."},
						"effective": map[string]any{"type": "string", "enum": []string{string(accounts.EffectiveNow), string(accounts.EffectiveRenewal)},
							"description": "now, or renewal (the end of the current period); absent: now for an upgrade, renewal otherwise."},
					}},
				bodyRequired: true, example: map[string]any{"plan": "pro", "effective": "renewal"},
				errors: []string{"400", "404", "409", "503"}}),
			"delete": operation(op{id: "adminDeleteAccount", tag: "Accounts", summary: "Delete a closed account and its keys",
				description: "Once the closure's retention has passed (deletable_at in the account); before that, or for an account that is " +
					"not closed, 409 saying when it becomes possible. The id is not given to a new account afterwards.",
				status: "200", data: object(map[string]any{"id": str("The deleted account's id."), "deleted": map[string]any{"const": true}}),
				params: []any{accountID}, errors: []string{"400", "404", "409", "503"}}),
		},
		"/admin/v1/accounts/{account_id}/keys": map[string]any{
			"get": operation(op{id: "adminListKeys", tag: "Keys", summary: "A page of an account's keys",
				description: "Oldest first, the primary key first." + unknownParams, status: "200",
				data:   page("keys", key, auth.MaxKeyPage, "The page's keys."),
				params: []any{accountID, limitParam(auth.DefaultKeyPage, auth.MaxKeyPage), cursorParam(64)},
				errors: []string{"400", "404", "503"}}),
			"post": operation(op{id: "adminCreateKey", tag: "Keys", summary: "Create a sub-key",
				description: "Its restrictions are confined within the account's. Its value is in value, shown only this once. " +
					"A closed account gets no new key (409).",
				status: "201", data: keyWithValue(true), params: []any{accountID},
				body: keyBody, bodyRequired: true, example: map[string]any{"name": "ci", "apis": []string{"hash"}, "channels": []string{"rest"}},
				errors: []string{"400", "404", "409", "503"}}),
		},
		"/admin/v1/keys/{key_id}/rotate": map[string]any{"post": operation(op{id: "adminRotateKey", tag: "Keys",
			summary: "Give a key a new value", description: "The old value is refused from the next call on. A revoked key cannot be rotated (409).",
			status: "200", data: keyWithValue(true), params: []any{keyID}, errors: []string{"400", "404", "409", "503"}})},
		"/admin/v1/keys/{key_id}/revoke": map[string]any{"post": operation(op{id: "adminRevokeKey", tag: "Keys",
			summary: "Revoke a key", description: "Its next call is refused. Revoking a revoked key changes nothing.",
			status: "200", data: keyWithValue(false), params: []any{keyID}, errors: []string{"400", "404", "503"}})},
		"/admin/v1/accounts/{account_id}/credits": map[string]any{"post": operation(op{id: "adminAdjustCredits", tag: "Credits",
			summary: "Grant credits, or take them away",
			description: "A grant carries over when the plan's allowance renews, until it is spent or lapses at expires_at. " +
				"A negative amount takes credits away, the allowance first, never below zero (409). With an Idempotency-Key, " +
				"a retried request applies once: a key used before answers the current balance and changes nothing.",
			status: "200", data: object(map[string]any{"balance": balance}),
			params: []any{accountID, map[string]any{"name": wire.HeaderIdempotencyKey, "in": "header", "required": false,
				"description": "Makes a retried request apply once.", "schema": map[string]any{"type": "string", "maxLength": 255}}},
			body: creditsBody, bodyRequired: true, example: map[string]any{"amount": 100, "reason": "goodwill"},
			errors: []string{"400", "404", "409", "503"}})},
		"/admin/v1/accounts/{account_id}/audit": map[string]any{"get": operation(op{id: "adminAuditLog", tag: "Audit",
			summary: "A page of an account's audit log",
			description: "Newest first: every change to the account's keys, credits and state, who made it and from which address, " +
				"never a key value. A service that keeps no audit log answers 404." + unknownParams,
			status: "200", data: page("entries", auditEntry, audit.MaxLimit, "The page's entries, newest first."),
			params: []any{accountID, limitParam(audit.DefaultLimit, audit.MaxLimit), cursorParam(64),
				queryParam("from", "Only the entries at or after it (RFC 3339).", map[string]any{"type": "string", "format": "date-time"}),
				queryParam("to", "Only the entries before it (RFC 3339); after from.", map[string]any{"type": "string", "format": "date-time"}),
			},
			errors: []string{"400", "404", "503"}})},
		"/admin/v1/accounts/{account_id}/suspend": stateOp("adminSuspendAccount", "Suspend an account",
			"Every call of its keys is refused with 403 account_suspended until it is reactivated; its holder may still read the account. "+
				"Suspending a suspended account changes nothing; a closed account cannot be suspended (409).", true),
		"/admin/v1/accounts/{account_id}/reactivate": stateOp("adminReactivateAccount", "Reactivate a suspended account",
			"Its keys call again from the next call. The body, and its reason, may be left out. A closed account cannot be reactivated (409).", false),
		"/admin/v1/accounts/{account_id}/close": stateOp("adminCloseAccount", "Close an account for good",
			"Every key of it is revoked. A closed account cannot be suspended, reactivated or given keys; closing it again finishes "+
				"a closure an outage interrupted.", true),
		"/admin/v1/usage": map[string]any{"get": operation(op{id: "adminUsage", tag: "Usage",
			summary: "The usage of every account over a range, ranked",
			description: "Calls, credits and errors summed per group (group_by), largest first (order), ties by the group's value. " +
				"The range [from, to) is widened to whole minutes and read from the coarsest buckets that cover it: a range at midnight UTC " +
				"may cover 400 days, one on the hour 31 days, any other 1 day. A service that records no usage answers 404." + unknownParams,
			status: "200", data: usageData,
			params: []any{
				queryParam("from", "The start of the range, RFC 3339 or a date (midnight UTC); by default midnight UTC 30 days before to.", instantOrDate),
				queryParam("to", "The end of the range, exclusive, RFC 3339 or a date; by default the end of today (UTC).", instantOrDate),
				queryParam("group_by", "What the totals are summed per.", map[string]any{"type": "string", "default": string(usage.ByAccount),
					"enum": []string{string(usage.ByAccount), string(usage.ByAPI), string(usage.ByChannel), string(usage.ByOutcome)}}),
				queryParam("order", "What the groups are ranked by, largest first.", map[string]any{"type": "string", "default": string(usage.ByCalls),
					"enum": []string{string(usage.ByCalls), string(usage.ByCredits)}}),
				queryParam("account", "Only the calls of this account.", map[string]any{"type": "string", "maxLength": 64}),
				queryParam("api", "Only the calls of this API.", map[string]any{"type": "string", "maxLength": 256}),
				queryParam("channel", "Only the calls by this channel (other: made without one).", map[string]any{"type": "string", "enum": channels}),
				queryParam("outcome", "Only the calls with this outcome: ok, or an error code.", map[string]any{"type": "string", "enum": outcomes}),
				limitParam(usage.DefaultTotalsLimit, usage.MaxTotalsLimit), cursorParam(usage.MaxTotalsCursor),
			},
			errors: []string{"400", "404", "503"}})},
	}
}

func openAPIComponents() map[string]any {
	strs := func(description string) map[string]any {
		return map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "description": description}
	}
	restrictions := map[string]any{
		"apis":        strs("The APIs the keys may call; empty: every API."),
		"channels":    strs("The channels they may call by; empty: every channel."),
		"allowed_ips": strs("The addresses they may call from, as CIDR prefixes; empty: any."),
		"expires_at":  nullableInstant("When they stop working; null: never."),
	}
	with := func(props map[string]any) map[string]any {
		maps.Copy(props, restrictions)
		return props
	}
	accountSchema := object(with(map[string]any{
		"id": str("The account's id."), "plan": str("The account's plan."), "created_at": instant("When it was created."),
		"state": map[string]any{"type": "string", "enum": []string{string(auth.AccountActive), string(auth.AccountSuspended), string(auth.AccountClosed)},
			"description": "A suspended account's calls are refused until it is reactivated; a closed account's keys are revoked for good."},
		"state_changed_at": nullableInstant("When the state last changed; null if it never did."),
		"deletable_at":     instant("For a closed account: from when DELETE may delete it."),
		"billing_anchor": nullableInstant("When the account's credit periods are counted from: each renews on its day of the month " +
			"(or of the year) at its time of day, in UTC. Null: calendar months."),
		"pending_plan":    nullable("string", "The plan the account moves to at pending_plan_at, the end of the current period; null when no change waits."),
		"pending_plan_at": nullableInstant("When pending_plan takes effect; null when no change waits."),
	}), "deletable_at")
	accountSchema["description"] = "An account. Its restrictions confine every key of it."

	keySchema := object(with(map[string]any{
		"id": str("The key's id (not its value)."), "account": str("The account's id."), "name": str("The key's name."),
		"primary":    map[string]any{"type": "boolean", "description": "Whether it is the account's primary key, created with it."},
		"created_at": instant("When it was created."), "revoked": map[string]any{"type": "boolean"},
		"rotated_at": instant("When it was last given a new value; absent if never."),
		"revoked_at": instant("When it was revoked; absent if it is not."),
	}), "rotated_at", "revoked_at")
	keySchema["description"] = "A key: never its value, which only the answers that create one carry."

	planSchema := object(map[string]any{
		"name": str("The plan's name."), "credits": count("The allowance of a period, which renews."),
		"renews": map[string]any{"type": "string", "enum": []string{string(billing.Monthly), string(billing.Yearly)},
			"description": "How often the allowance renews; absent: monthly."},
		"rate_per_minute":  count("Calls per minute; 0: unlimited."),
		"burst":            count("Calls that may arrive at once; absent: rate_per_minute."),
		"concurrency":      count("Calls that may run at once; 0: unlimited."),
		"graphql_max_apis": count("APIs one GraphQL query may name; 0: no cap."),
		"batch_max_items":  count("Items one batch may hold; 0: the default."),
	}, "burst", "renews")

	entrySchema := object(map[string]any{
		"at": instant("When the change was made."),
		"actor": str("Who made it: operator (or operator:<name>) for the admin API, host for the host's own code, " +
			"a key id or session:<id> for the account holder, service for what the service did by itself (a webhook endpoint " +
			"disabled after its deliveries failed for the whole retry schedule)."),
		"action": str("What was done: account.create, key.create, key.rotate, key.revoke, key.update, credits.adjust, plan.change, " +
			"session.start, session.end, account.suspend, account.reactivate, account.close, account.delete, endpoint.create, " +
			"endpoint.update, endpoint.rotate, endpoint.disable, endpoint.enable, endpoint.delete, or an action of the host's."),
		"account": str("The account."),
		"target":  nullable("string", "The key (or session, or webhook endpoint) the change is about; null for none."),
		"before": nullable("object", "The target's restrictions before the change, or for plan.change {\"plan\"}, the plan before, "+
			"or for endpoint.update and endpoint.delete the endpoint's {\"url\", \"events\"}; null where there is nothing to record."),
		"after": nullable("object", "The target's restrictions after the change, or for plan.change {\"plan\", \"effective_at\"}, "+
			"the new plan and when it takes effect, or for endpoint.create and endpoint.update the endpoint's {\"url\", \"events\"}, "+
			"or for endpoint.rotate {\"previous_secret_until\"}; null where there is nothing to record."),
		"credits": nullable("integer", "The change of the credits, for credits.adjust; else null."),
		"address": nullable("string", "The address the change was requested from; null if unknown."),
		"reason":  nullable("string", "The reason given; null for none."),
	})

	totals := object(map[string]any{
		"calls": count("Calls, refused ones included."), "credits": count("Credits charged."),
		"errors": count("Calls that did not succeed."),
	})
	row := object(map[string]any{
		"group": str("The group's value: an account id, an API id, a channel or an outcome."),
		"calls": count("Calls, refused ones included."), "credits": count("Credits charged."),
		"errors": count("Calls that did not succeed."),
	})
	filter := func(what string) map[string]any { return nullable("string", "The "+what+" filter; null for none.") }
	usagePage := object(map[string]any{
		"from": instant("The start of the range, as widened."), "to": instant("The end of the range, as widened."),
		"resolution": map[string]any{"type": "string", "enum": []string{"minute", "hour", "day"}, "description": "The buckets the range was read from."},
		"group_by":   map[string]any{"type": "string", "enum": []string{string(usage.ByAccount), string(usage.ByAPI), string(usage.ByChannel), string(usage.ByOutcome)}},
		"order":      map[string]any{"type": "string", "enum": []string{string(usage.ByCalls), string(usage.ByCredits)}},
		"filters":    object(map[string]any{"account": filter("account"), "api": filter("API"), "channel": filter("channel"), "outcome": filter("outcome")}),
		"rows":       map[string]any{"type": "array", "items": row, "maxItems": usage.MaxTotalsLimit, "description": "A row per group of the page."},
		"total":      totals,
		"groups":     count("The groups of the whole selection."),
		"next":       nullable("string", "The cursor of the next page; null on the last."),
	})
	usagePage["description"] = "A page of a ranking of usage, and the totals of the whole selection."

	balanceSchema := mgmtapi.BalanceSchema()

	param := func(name, description string) map[string]any {
		return map[string]any{"name": name, "in": "path", "required": true, "description": description,
			"schema": map[string]any{"type": "string", "minLength": 1, "maxLength": 64}}
	}
	hookParams, hookSchemas := webhookComponents()
	params := map[string]any{
		"AccountID": param("account_id", "The account's id."),
		"KeyID":     param("key_id", "The key's id (not its value)."),
	}
	maps.Copy(params, hookParams)
	schemas := map[string]any{
		"Account": accountSchema, "Key": keySchema, "Balance": balanceSchema, "Plan": planSchema,
		"AuditEntry": entrySchema, "UsagePage": usagePage,
	}
	maps.Copy(schemas, hookSchemas)
	return map[string]any{
		"securitySchemes": map[string]any{
			"adminToken": map[string]any{"type": "http", "scheme": "bearer",
				"description": "The admin token the host configured, compared in constant time."},
		},
		"parameters": params,
		"schemas":    schemas,
		"responses": map[string]any{
			"BadRequest":           errorResponse("A parameter or the body is missing, unknown, mistyped or out of bounds; the message names it.", wire.CodeInvalidInput),
			"Unauthorized":         unauthorized(),
			"NotFound":             errorResponse("No account, key, webhook endpoint or delivery has the id, or the service does not keep what the route reads; or the service delivers no webhooks.", wire.CodeNotFound),
			"MethodNotAllowed":     methodNotAllowed(),
			"Conflict":             errorResponse("The change conflicts with the record as it is; the message says why.", wire.CodeConflict),
			"TooLarge":             errorResponse("The body is larger than "+strconv.Itoa(mgmtapi.MaxBody)+" bytes.", wire.CodeBodyTooLarge),
			"UnsupportedMediaType": errorResponse("The body is not sent as application/json.", wire.CodeUnsupportedMediaType),
			"Unavailable":          errorResponse("A store cannot be reached; nothing was done. Retry later.", wire.CodeUnavailable),
			"Error":                errorResponse("An unexpected failure inside the service.", wire.CodeInternal),
		},
	}
}

// errorSchema is the schema of the error envelope of code.
func errorSchema(code string) map[string]any {
	return map[string]any{
		"type": "object", "required": []string{"status", "error", "data", "code"},
		"properties": map[string]any{
			"status": map[string]any{"const": "error"},
			"error":  map[string]any{"type": "string", "description": "What went wrong, for people."},
			"data":   map[string]any{"type": "null"},
			"code":   map[string]any{"type": "string", "const": code, "description": "The machine-readable cause, as in X-Error-Code."},
		},
	}
}

// errorResponse is an error answer with the given code.
func errorResponse(description, code string) map[string]any {
	codeSchema := map[string]any{"type": "string", "const": code}
	return map[string]any{
		"description": description,
		"headers": map[string]any{
			wire.HeaderErrorCode: map[string]any{"required": true, "description": "The machine-readable cause.", "schema": codeSchema},
		},
		"content": map[string]any{"application/json": map[string]any{"schema": errorSchema(code)}},
	}
}

func unauthorized() map[string]any {
	r := errorResponse("No admin token, or not this one: send it as Authorization: Bearer <token>.", wire.CodeUnauthorized)
	r["headers"].(map[string]any)["WWW-Authenticate"] = map[string]any{"required": true,
		"description": `Bearer realm="tollgate-admin".`, "schema": map[string]any{"type": "string"}}
	return r
}

func methodNotAllowed() map[string]any {
	r := errorResponse("The path takes other methods, which Allow lists.", wire.CodeMethodNotAllowed)
	r["headers"].(map[string]any)["Allow"] = map[string]any{"required": true,
		"description": "The methods the path takes.", "schema": map[string]any{"type": "string"}}
	return r
}

// openAPIDoc is the document as served: its bytes and their strong ETag.
type openAPIDoc struct {
	body []byte
	etag string
}

// buildOpenAPI encodes [OpenAPI] for the handler, which builds it once.
func buildOpenAPI() (openAPIDoc, error) {
	body, err := json.Marshal(OpenAPI())
	if err != nil {
		return openAPIDoc{}, err
	}
	sum := sha256.Sum256(body)
	return openAPIDoc{body: body, etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:16]) + `"`}, nil
}

// serveOpenAPI answers GET /admin/v1/openapi.json: the document, with its ETag and
// Cache-Control: no-cache, or 304 for a request whose If-None-Match names the ETag.
// The admin API answers no cross-origin call, and so writes no CORS header here either.
func (h *Handler) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	d, err := h.openapi()
	if err != nil {
		h.door.WriteError(w, r, err, nil)
		return
	}
	hdr := w.Header()
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("ETag", d.etag)
	if matchesETag(r.Header.Values("If-None-Match"), d.etag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	hdr.Set("Content-Type", "application/json")
	w.Write(d.body)
}

// matchesETag reports whether the If-None-Match values name etag, or are "*"; the
// comparison is weak (RFC 9110, 13.1.2), as If-None-Match's is.
func matchesETag(values []string, etag string) bool {
	for _, v := range values {
		for tag := range strings.SplitSeq(v, ",") {
			tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
			if tag == "*" || tag == etag {
				return true
			}
		}
	}
	return false
}
