package dashboard

import "net/http"

// openAPIPath is where the service's OpenAPI document is, under its root.
const openAPIPath = "/v1/openapi.json"

// referenceData is the API reference page.
type referenceData struct {
	// Spec is the path of the OpenAPI document.
	Spec string
}

// referencePage serves the API reference: the service's OpenAPI document, rendered in
// the browser by Swagger UI (embedded, with its validator badge and "try it out"
// off: it fetches the document from the service and nothing else).
func (h *Handler) referencePage(w http.ResponseWriter, r *http.Request, v *visit) {
	page := v.view("API reference", "reference")
	page.Data = referenceData{Spec: h.servicePath(openAPIPath)}
	h.render(w, r, http.StatusOK, "reference", page)
}
