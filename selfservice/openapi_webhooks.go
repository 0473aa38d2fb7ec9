package selfservice

import (
	"github.com/tollgate-dev/tollgate/internal/mgmtapi"
	"github.com/tollgate-dev/tollgate/webhook"
)

// webhookPaths returns the OpenAPI path items of the routes of the account's webhook
// endpoints, built with the operations of OpenAPIPaths: op (an operation with its
// success and the error statuses it adds) and withBody.
func webhookPaths(op func(id, summary string, data map[string]any, status string, extra ...string) map[string]any,
	withBody func(o, schema map[string]any) map[string]any) map[string]any {
	const about = "Self-service: never billed, no rate-limit event. Only the account's primary key, or a session acting as it, " +
		"manages the account's webhook endpoints: a sub-key is refused with 403. Another account's endpoint is a 404, " +
		"and so is every route of a service that delivers no webhooks."
	const budget = " It spends the account's self-service budget, as a change of a key does: beyond it, 429 with Retry-After."
	endpoint := mgmtapi.WebhookEndpointSchema("The secret, masked: whsec_ and its first four characters, then …. " +
		"It is shown in full only where it is created or rotated.")
	withSecret := mgmtapi.WebhookEndpointSchema("The endpoint's signing secret, in full: whsec_ and the base64 of 32 bytes, " +
		"shown this once (every other answer masks it). Verify each delivery's webhook-signature with it (Standard Webhooks).")
	delivery := mgmtapi.WebhookDeliverySchema()
	endpointID := map[string]any{"name": "endpoint_id", "in": "path", "required": true, "description": "The webhook endpoint's id.",
		"schema": map[string]any{"type": "string", "minLength": 1, "maxLength": webhook.MaxID}}
	messageID := map[string]any{"name": "message_id", "in": "path", "required": true, "description": "The message's id, as a listing of deliveries gives it.",
		"schema": map[string]any{"type": "string", "minLength": 1, "maxLength": webhook.MaxID}}
	settings := func(description string) map[string]any {
		return map[string]any{"type": "object", "additionalProperties": false, "description": description,
			"properties": map[string]any{
				"url": map[string]any{"type": "string", "format": "uri", "minLength": 1, "maxLength": webhook.MaxURLLength,
					"description": "Where deliveries are posted: an absolute http or https URL, without a user name, password or fragment, " +
						"on a public host (not localhost, nor a private, loopback or link-local address, unless the service allows them)."},
				"events": map[string]any{"type": "array", "items": map[string]any{"type": "string", "enum": webhook.Types()},
					"description": "The event types the endpoint receives; none (or empty) for every type."},
			}}
	}
	createBody := settings("The new endpoint's URL and event types.")
	createBody["required"] = []string{"url"}
	updateBody := settings("What changes: each property given replaces the endpoint's; at least one.")
	updateBody["minProperties"] = 1
	updateBody["properties"].(map[string]any)["disabled"] = map[string]any{"type": "boolean",
		"description": "true disables the endpoint (no new deliveries); false enables it again."}
	// hook is an operation of these routes: with their description, the endpoint's id
	// as a parameter (but for the listing and the creation), and the error statuses
	// named, answered in the envelope.
	hook := func(o map[string]any, description string, params []any, statuses ...string) map[string]any {
		o["description"] = about + description
		if params != nil {
			o["parameters"] = params
		}
		for _, s := range statuses {
			o["responses"].(map[string]any)[s] = ref("#/components/responses/Error")
		}
		return o
	}
	one := []any{endpointID}
	list := map[string]any{"type": "object", "required": []string{"endpoints"}, "properties": map[string]any{
		"endpoints": map[string]any{"type": "array", "items": endpoint, "maxItems": webhook.MaxEndpoints, "description": "The endpoints, oldest first."}}}
	deleted := map[string]any{"type": "object", "required": []string{"id", "deleted"}, "properties": map[string]any{
		"id": map[string]any{"type": "string"}, "deleted": map[string]any{"const": true}}}
	deliveries := map[string]any{"type": "object", "required": []string{"deliveries", "next"}, "properties": map[string]any{
		"deliveries": map[string]any{"type": "array", "items": delivery, "maxItems": webhook.MaxLimit, "description": "Newest message first."},
		"next":       map[string]any{"type": []string{"string", "null"}, "description": "The cursor of the next page; null on the last."}}}
	listDeliveries := hook(op("accountWebhookDeliveries", "A page of a webhook endpoint's deliveries", deliveries, "200", "400"),
		" Each delivery's message (its id, type and the payload posted), its state, attempts and last attempt.", nil, "404", "503")
	listDeliveries["parameters"] = []any{endpointID,
		map[string]any{"name": "limit", "in": "query", "description": "The most deliveries on the page; 20 by default.",
			"schema": map[string]any{"type": "integer", "minimum": 1, "maximum": webhook.MaxLimit}},
		map[string]any{"name": "cursor", "in": "query", "description": "The next of the page before.",
			"schema": map[string]any{"type": "string", "maxLength": 64}},
	}
	return map[string]any{
		"/v1/account/webhooks": map[string]any{
			"get": hook(op("accountWebhooks", "The account's webhook endpoints", list, "200", "400"),
				" Their secrets are masked. The route takes no query parameter (400).", nil, "404", "503"),
			"post": hook(withBody(op("accountCreateWebhook", "Create a webhook endpoint", withSecret, "201", "400", "413", "429"), createBody),
				" It receives the account's events of the types in events. Its secret is in secret, shown only this once. "+
					"An account has at most 16 endpoints: one more is a 409 saying to delete one."+budget, nil, "404", "409", "503"),
		},
		"/v1/account/webhooks/{endpoint_id}": map[string]any{
			"get": hook(op("accountWebhook", "One of the account's webhook endpoints", endpoint, "200", "400"), "", one, "404", "503"),
			"patch": hook(withBody(op("accountUpdateWebhook", "Change a webhook endpoint", endpoint, "200", "400", "413", "429"), updateBody),
				" Its URL, its event types, or whether it is disabled: a disabled endpoint is given no new deliveries, and enabling it "+
					"does not send what it missed meanwhile. An endpoint the operator disabled (disabled_by operator) stays disabled: "+
					"enabling it is a 409 (conflict) saying that only the operator enables it again, and changes nothing. "+
					"Disabling alone spends nothing; any other change spends the account's "+
					"self-service budget, as a change of a key does: beyond it, 429 with Retry-After.", one, "404", "409", "503"),
			"delete": hook(op("accountDeleteWebhook", "Delete a webhook endpoint", deleted, "200", "400"),
				" With its deliveries, pending or not.", one, "404", "503"),
		},
		"/v1/account/webhooks/{endpoint_id}/rotate": map[string]any{"post": hook(op("accountRotateWebhook",
			"Give a webhook endpoint a new secret", withSecret, "200", "400", "429"),
			" The new secret is in secret, shown only this once. The secret it replaces still signs deliveries beside it until "+
				"previous_secret_until (24 hours by default), so that the receiver can move to the new one."+budget, one, "404", "503")},
		"/v1/account/webhooks/{endpoint_id}/test": map[string]any{"post": hook(op("accountTestWebhook",
			"Send a webhook endpoint a test message", delivery, "202", "400", "429"),
			" Enqueues an endpoint.test message for this endpoint only, whatever its event types, and answers its delivery, pending. "+
				"A disabled endpoint, or one with as many deliveries pending as it may have, is a 409."+budget, one, "404", "409", "503")},
		"/v1/account/webhooks/{endpoint_id}/deliveries": map[string]any{"get": listDeliveries},
		"/v1/account/webhooks/{endpoint_id}/deliveries/{message_id}/resend": map[string]any{"post": hook(op("accountResendWebhook",
			"Deliver a message to a webhook endpoint again", delivery, "202", "400", "429"),
			" The delivery is pending again, due now, whatever its state; it keeps its webhook-id. A disabled endpoint is a 409."+budget,
			[]any{endpointID, messageID}, "404", "409", "503")},
	}
}
