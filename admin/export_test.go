package admin

// Routes returns the routes h registers, as "METHOD path" ("GET /admin/v1/plans"), for
// the test that holds the OpenAPI document to them.
func Routes(h *Handler) []string {
	out := make([]string, len(h.routes))
	for i, rt := range h.routes {
		out[i] = rt.Method + " " + rt.Path
	}
	return out
}
