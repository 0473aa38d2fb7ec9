package admin

import (
	"github.com/tollgate-dev/tollgate/internal/mgmtapi"
	"github.com/tollgate-dev/tollgate/webhook"
)

// The OpenAPI description of the routes of webhook endpoints (webhooks.go).

// masked says what the secret of an endpoint is in an answer that does not create it.
const masked = "The secret, masked: whsec_ and its first four characters, then …. It is shown in full only where it is created or rotated."

// webhookPaths returns the path items of the routes of webhook endpoints.
func webhookPaths() map[string]any {
	endpointID := ref("#/components/parameters/EndpointID")
	accountID := ref("#/components/parameters/AccountID")
	endpoint, delivery := schema("WebhookEndpoint"), schema("WebhookDelivery")
	withSecret := mgmtapi.WebhookEndpointSchema("The endpoint's signing secret, in full: whsec_ and the base64 of 32 bytes. " +
		"It is shown this once; every other answer masks it. Verify each delivery's webhook-signature with it (Standard Webhooks).")
	settings := func(required ...string) map[string]any {
		s := map[string]any{"type": "object", "additionalProperties": false, "properties": map[string]any{
			"url": map[string]any{"type": "string", "format": "uri", "minLength": 1, "maxLength": webhook.MaxURLLength,
				"description": "Where deliveries are posted: an absolute http or https URL, without a user name, password or fragment, " +
					"on a public host (not localhost, nor a private, loopback or link-local address, unless the host allows them)."},
			"events": map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": webhook.Types()},
				"description": "The event types the endpoint receives; none (or empty) for every type. Repeats count once."},
		}}
		if len(required) > 0 {
			s["required"] = required
		}
		return s
	}
	createBody := settings("url")
	createBody["description"] = "The new endpoint's URL and event types."
	updateBody := settings()
	updateBody["description"] = "What changes: each property given replaces the endpoint's; at least one."
	updateBody["minProperties"] = 1
	updateBody["properties"].(map[string]any)["disabled"] = map[string]any{"type": "boolean",
		"description": "true disables the endpoint (no new deliveries; the reason \"disabled by the operator\"); false enables it again."}
	accountBody := map[string]any{"type": "object", "additionalProperties": false, "required": []string{"disabled"},
		"description": "Disable the account's endpoint, or enable it again.",
		"properties": map[string]any{
			"disabled": map[string]any{"type": "boolean", "description": "true disables it (no new deliveries; its holder cannot enable it again), " +
				"false enables it again, whoever disabled it."},
			"reason": reasonSchema(false, "Why it is disabled, shown to the account's holder with the endpoint (after \"disabled by the operator: \") "+
				"and in the account's audit log.")},
	}
	accountBody["properties"].(map[string]any)["reason"].(map[string]any)["maxLength"] = webhook.MaxReason - len("disabled by the operator: ")
	list := object(map[string]any{"endpoints": map[string]any{"type": "array", "items": endpoint, "maxItems": webhook.MaxEndpoints,
		"description": "The endpoints, oldest first."}})
	none := " A service that delivers no webhooks answers 404."
	hook := func(o op) map[string]any {
		o.tag = "Webhooks"
		o.description += none
		return operation(o)
	}
	deliveriesPage := page("deliveries", delivery, webhook.MaxLimit, "The page's deliveries, newest message first.")
	return map[string]any{
		"/admin/v1/webhooks": map[string]any{
			"get": hook(op{id: "adminListWebhooks", summary: "The operator's webhook endpoints",
				description: "They receive the events of every account. Their secrets are masked. The route takes no query parameter (400).",
				status:      "200", data: list, errors: []string{"400", "404", "503"}}),
			"post": hook(op{id: "adminCreateWebhook", summary: "Create a webhook endpoint of the operator's",
				description: "It receives the events of every account, of the types in events. Its secret is in secret, shown only this once. " +
					"The operator has at most 16 endpoints: one more is a 409 saying to delete one.",
				status: "201", data: withSecret, body: createBody, bodyRequired: true,
				example: map[string]any{"url": "https://ops.example.com/webhooks", "events": []string{"account.suspended", "credits.exhausted"}},
				errors:  []string{"400", "404", "409", "503"}}),
		},
		"/admin/v1/webhooks/{endpoint_id}": map[string]any{
			"get": hook(op{id: "adminGetWebhook", summary: "One of the operator's webhook endpoints",
				description: "An account's endpoint is not found here: see /admin/v1/accounts/{account_id}/webhooks.",
				status:      "200", data: endpoint, params: []any{endpointID}, errors: []string{"400", "404", "503"}}),
			"patch": hook(op{id: "adminUpdateWebhook", summary: "Change one of the operator's webhook endpoints",
				description: "Its URL, its event types, or whether it is disabled. A disabled endpoint is given no new deliveries; enabling it " +
					"does not send what it missed meanwhile. A change that changes nothing answers the endpoint as it is.",
				status: "200", data: endpoint, params: []any{endpointID}, body: updateBody, bodyRequired: true,
				example: map[string]any{"events": []string{"key.revoked"}}, errors: []string{"400", "404", "503"}}),
			"delete": hook(op{id: "adminDeleteWebhook", summary: "Delete one of the operator's webhook endpoints",
				description: "With its deliveries, pending or not.",
				status:      "200", data: object(map[string]any{"id": str("The deleted endpoint's id."), "deleted": map[string]any{"const": true}}),
				params: []any{endpointID}, errors: []string{"400", "404", "503"}}),
		},
		"/admin/v1/webhooks/{endpoint_id}/rotate": map[string]any{"post": hook(op{id: "adminRotateWebhook",
			summary: "Give a webhook endpoint a new secret",
			description: "The new secret is in secret, shown only this once. The secret it replaces still signs deliveries beside it " +
				"until previous_secret_until (24 hours by default), so that the receiver can move to the new one.",
			status: "200", data: withSecret, params: []any{endpointID}, errors: []string{"400", "404", "503"}})},
		"/admin/v1/webhooks/{endpoint_id}/test": map[string]any{"post": hook(op{id: "adminTestWebhook",
			summary: "Send a webhook endpoint a test message",
			description: "Enqueues an endpoint.test message for this endpoint only, whatever its event types, and answers its delivery, " +
				"pending. A disabled endpoint, or one with as many deliveries pending as it may have, is a 409.",
			status: "202", data: delivery, params: []any{endpointID}, errors: []string{"400", "404", "409", "503"}})},
		"/admin/v1/webhooks/{endpoint_id}/deliveries": map[string]any{"get": hook(op{id: "adminWebhookDeliveries",
			summary:     "A page of a webhook endpoint's deliveries",
			description: "Newest message first: each delivery's message, state, attempts and last attempt." + unknownParams,
			status:      "200", data: deliveriesPage,
			params: []any{endpointID, limitParam(webhook.DefaultLimit, webhook.MaxLimit), cursorParam(64)},
			errors: []string{"400", "404", "503"}})},
		"/admin/v1/webhooks/{endpoint_id}/deliveries/{message_id}/resend": map[string]any{"post": hook(op{id: "adminResendWebhook",
			summary: "Deliver a message to a webhook endpoint again",
			description: "The delivery is pending again, due now, whatever its state; it keeps its webhook-id. A disabled endpoint is a 409; " +
				"a message the endpoint has no delivery of (or no longer: deliveries are kept for a while after their last attempt) a 404.",
			status: "202", data: delivery, params: []any{endpointID, ref("#/components/parameters/MessageID")},
			errors: []string{"400", "404", "409", "503"}})},
		"/admin/v1/accounts/{account_id}/webhooks": map[string]any{"get": hook(op{id: "adminAccountWebhooks",
			summary:     "An account's webhook endpoints",
			description: "They receive the account's events; its holder manages them. Their secrets are masked. The route takes no query parameter (400).",
			status:      "200", data: list, params: []any{accountID}, errors: []string{"400", "404", "503"}})},
		"/admin/v1/accounts/{account_id}/webhooks/{endpoint_id}": map[string]any{
			"patch": hook(op{id: "adminDisableAccountWebhook",
				summary: "Disable an account's webhook endpoint, or enable it again",
				description: "A disabled endpoint is given no new deliveries; its disabled_reason (\"disabled by the operator\", and the reason " +
					"given) and its disabled_by (operator) are shown to the account's holder, and the change is in the account's audit log. " +
					"The operator's disabling sticks: the holder's enabling is refused (409) until the operator enables it again. The operator " +
					"enables an endpoint whoever disabled it, and disabling one that its holder or the service disabled makes it the operator's.",
				status: "200", data: endpoint, params: []any{accountID, endpointID}, body: accountBody, bodyRequired: true,
				example: map[string]any{"disabled": true, "reason": "it answers every delivery with 500"}, errors: []string{"400", "404", "503"}}),
			"delete": hook(op{id: "adminDeleteAccountWebhook", summary: "Delete an account's webhook endpoint",
				description: "With its deliveries, pending or not; the deletion is in the account's audit log. An id that names no endpoint " +
					"of the account is a 404.",
				status: "200", data: object(map[string]any{"id": str("The deleted endpoint's id."), "deleted": map[string]any{"const": true}}),
				params: []any{accountID, endpointID}, errors: []string{"400", "404", "503"}}),
		},
	}
}

// webhookComponents are the parameters and schemas of the routes of webhook endpoints.
func webhookComponents() (params, schemas map[string]any) {
	param := func(name, description string) map[string]any {
		return map[string]any{"name": name, "in": "path", "required": true, "description": description,
			"schema": map[string]any{"type": "string", "minLength": 1, "maxLength": webhook.MaxID}}
	}
	return map[string]any{
			"EndpointID": param("endpoint_id", "The webhook endpoint's id."),
			"MessageID":  param("message_id", "The message's id, as a listing of deliveries gives it."),
		}, map[string]any{
			"WebhookEndpoint": mgmtapi.WebhookEndpointSchema(masked),
			"WebhookDelivery": mgmtapi.WebhookDeliverySchema(),
		}
}
