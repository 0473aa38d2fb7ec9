package rest

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAPIPathAgreesWithTheMux checks the shortcut of ServeHTTP against the mux it
// stands in for: a request it takes is one the mux routes to patternAPI, with the same
// API id and without a redirect.
func TestAPIPathAgreesWithTheMux(t *testing.T) {
	type routed struct {
		pattern, id string
		status      int
	}
	mux := http.NewServeMux()
	for _, p := range []string{patternCatalog, patternOpenAPI, patternAnalytics, patternAPI, patternBatch, patternNoRoute} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Id", r.PathValue("api_id"))
		})
	}
	viaMux := func(r *http.Request) routed {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		return routed{r.Pattern, rec.Header().Get("X-Id"), rec.Code}
	}
	for _, c := range []struct {
		method, target string
		taken          bool
	}{
		{"GET", "/v1/hash", true},
		{"POST", "/v1/hash?text=a", true},
		{"DELETE", "/v1/hash", true},
		{"GET", "/v1/ha%20sh", true},
		{"GET", "/v1/a.b", true},
		{"GET", "/v1/..a", true},
		{"GET", "/v1/%C3%A9", true},
		{"GET", "/v1/hash%3Fx", true},
		{"GET", "/v1/a%2Fb", false},
		{"GET", "/v1/%68ash", false},
		{"GET", "/v1/", false},
		{"GET", "/v1/.", false},
		{"GET", "/v1/..", false},
		{"GET", "/v1/%2e%2e", false},
		{"GET", "/v1//hash", false},
		{"GET", "/v1/hash/", false},
		{"GET", "/v1/hash/batch", false},
		{"GET", "/v1/catalog", false},
		{"GET", "/v1/openapi.json", false},
		{"GET", "/v1/analytics", false},
		{"GET", "/v1/../v1/hash", false},
		{"GET", "/V1/hash", false},
		{"GET", "/hash", false},
		{"CONNECT", "/v1/hash", false},
	} {
		r := httptest.NewRequest(c.method, "http://example.com"+c.target, nil)
		id, taken := apiPath(r)
		if taken != c.taken {
			t.Errorf("%s %s: apiPath takes it: %v, want %v", c.method, c.target, taken, c.taken)
		}
		if !taken {
			continue
		}
		want := viaMux(httptest.NewRequest(c.method, "http://example.com"+c.target, nil))
		if got := (routed{patternAPI, id, http.StatusOK}); got != want {
			t.Errorf("%s %s: apiPath routes it to %+v, the mux to %+v", c.method, c.target, got, want)
		}
	}
}

// FuzzAPIPath checks the shortcut against the mux on any path.
func FuzzAPIPath(f *testing.F) {
	for _, p := range []string{"/v1/hash", "/v1/a%2Fb", "/v1/..", "/v1/catalog", "/v1/x/batch", "/v1/%2e"} {
		f.Add(p)
	}
	mux := http.NewServeMux()
	for _, p := range []string{patternCatalog, patternOpenAPI, patternAnalytics, patternAPI, patternBatch, patternNoRoute} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("X-Id", r.PathValue("api_id"))
		})
	}
	f.Fuzz(func(t *testing.T, target string) {
		r, err := http.NewRequest(http.MethodGet, "http://example.com"+target, nil)
		if err != nil || r.URL.Path == "" || r.URL.Path[0] != '/' || r.URL.Host != "example.com" {
			return
		}
		id, taken := apiPath(r)
		if !taken {
			return
		}
		r2 := r.Clone(t.Context())
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r2)
		if rec.Code != http.StatusOK || r2.Pattern != patternAPI || rec.Header().Get("X-Id") != id {
			t.Errorf("%q: apiPath routes it to the call of %q; the mux answers %d with pattern %q and id %q",
				target, id, rec.Code, r2.Pattern, rec.Header().Get("X-Id"))
		}
	})
}
