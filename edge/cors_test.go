package edge_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/tollgate-dev/tollgate/edge"
)

// TestCORSApply checks which CORS headers each kind of request gets: none without an
// Origin (but Vary: Origin on a cacheable answer or under a list of origins), the
// allowed origin and the exposed headers with one, nothing for an origin not listed.
func TestCORSApply(t *testing.T) {
	const app = "https://app.example"
	tests := []struct {
		name      string
		origins   []string
		origin    *string // nil: no Origin header
		cacheable bool
		allowed   bool
		acao      string // the Access-Control-Allow-Origin written, "" for none
		vary      bool
	}{
		{name: "any origin, no Origin", allowed: true},
		{name: "any origin, no Origin, cacheable", cacheable: true, allowed: true, vary: true},
		{name: "any origin, cross-origin", origin: ptr(app), allowed: true, acao: "*"},
		{name: "any origin, empty Origin", origin: ptr(""), allowed: true, acao: "*"},
		{name: "listed, no Origin", origins: []string{app}, allowed: true, vary: true},
		{name: "listed, allowed", origins: []string{app}, origin: ptr(app), allowed: true, acao: app, vary: true},
		{name: "listed, refused", origins: []string{app}, origin: ptr("https://evil.example"), vary: true},
		{name: "listed, empty Origin", origins: []string{app}, origin: ptr(""), vary: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := edge.New(&edge.Options{AllowedOrigins: tt.origins})
			if err != nil {
				t.Fatal(err)
			}
			d := e.Door(edge.DoorSpec{Methods: "GET"})
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if tt.origin != nil {
				r.Header["Origin"] = []string{*tt.origin}
			}
			hdr := http.Header{}
			if tt.cacheable {
				hdr.Set("Cache-Control", "public, max-age=60")
			}
			if got := d.CORS(hdr, r); got != tt.allowed {
				t.Errorf("Apply = %v, want %v", got, tt.allowed)
			}
			if got := hdr.Get("Access-Control-Allow-Origin"); got != tt.acao {
				t.Errorf("Access-Control-Allow-Origin = %q, want %q", got, tt.acao)
			}
			if exposed := hdr.Get("Access-Control-Expose-Headers") != ""; exposed != (tt.acao != "") {
				t.Errorf("Access-Control-Expose-Headers written: %v, want %v", exposed, tt.acao != "")
			}
			if got := slices.Contains(hdr.Values("Vary"), "Origin"); got != tt.vary {
				t.Errorf("Vary: Origin %v, want %v (headers %v)", got, tt.vary, hdr)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
