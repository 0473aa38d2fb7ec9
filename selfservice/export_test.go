package selfservice

// Routes returns the routes h registers, as "METHOD path" ("GET /v1/account/keys"),
// for the test that holds the OpenAPI paths to them.
func Routes(h *Handler) []string {
	out := make([]string, len(h.routes))
	for i, rt := range h.routes {
		out[i] = rt.Method + " " + rt.Path
	}
	return out
}
