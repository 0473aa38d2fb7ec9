package doors_test

import (
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/brand"
	"github.com/tollgate-dev/tollgate/doors"
	"github.com/tollgate-dev/tollgate/mcp"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/wire"
)

// TestMountBrand: the brand set once on Mount's options is what every door shows: the
// dashboard's title (escaped), the OpenAPI document's title, the MCP server's name and
// title in the answer to initialize, the OAuth consent page. A door's own setting
// wins over it.
func TestMountBrand(t *testing.T) {
	acme := brand.Brand{Name: `Acme <Cloud> & "Co" API`, Command: "acme", EnvPrefix: "ACME"}
	for _, tt := range []struct {
		name                          string
		opts                          doors.Options
		title, mcpName, mcpTitle, tab string
	}{
		{"default", doors.Options{}, "Tollgate API catalog", "tollgate", "", "Tollgate"},
		{"acme", doors.Options{Brand: acme}, `Acme <Cloud> & "Co" API catalog`, "acme", acme.Name, acme.Name},
		{"acme, with the doors' own names", doors.Options{Brand: acme, MCP: mcp.Options{Name: "acme-tools"}}, `Acme <Cloud> & "Co" API catalog`, "acme-tools", acme.Name, acme.Name},
	} {
		t.Run(tt.name, func(t *testing.T) {
			svc := newService(t, true)
			mux := http.NewServeMux()
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			opts := tt.opts
			opts.PublicURL, opts.OAuth = srv.URL, &doors.OAuth{Store: memory.NewOAuthStore()}
			m, err := doors.Mount(mux, svc, &opts)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(m.Close)
			if _, _, _, err := m.Accounts.CreateAccount(t.Context(), accounts.Spec{ID: "acme", Plan: "pro", KeyValue: key}); err != nil {
				t.Fatal(err)
			}

			_, body := get(t, srv, "/v1/openapi.json")
			var doc struct {
				Info struct{ Title string } `json:"info"`
			}
			if err := json.Unmarshal([]byte(body), &doc); err != nil || doc.Info.Title != tt.title {
				t.Errorf("the OpenAPI document's title is %q (%v), want %q", doc.Info.Title, err, tt.title)
			}

			if _, body := get(t, srv, "/dashboard/sign-in"); !strings.Contains(body, " · "+html.EscapeString(tt.tab)+"</title>") {
				t.Errorf("the dashboard's title does not end with %q, escaped:\n%.400s", tt.tab, body)
			}

			info := initialize(t, srv)
			if info.Name != tt.mcpName || info.Title != tt.mcpTitle {
				t.Errorf("serverInfo is %+v, want name %q and title %q", info, tt.mcpName, tt.mcpTitle)
			}

			// The authorization server's pages name the service.
			if _, body := get(t, srv, "/oauth/authorize?response_type=code&client_id=none"); !strings.Contains(body, html.EscapeString(tt.tab)) ||
				strings.Contains(body, "Tollgate") != (tt.tab == "Tollgate") {
				t.Errorf("the authorization page does not name %q:\n%.600s", tt.tab, body)
			}
		})
	}
}

// initialize starts an MCP session with the key and returns the server's info.
func initialize(t *testing.T, srv *httptest.Server) (info struct{ Name, Title, Version string }) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL+"/v1/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set(wire.HeaderAPIKey, key)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	msg := string(b)
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		_, msg, _ = strings.Cut(msg, "data: ")
		msg, _, _ = strings.Cut(msg, "\n")
	}
	var answer struct {
		Result struct {
			ServerInfo struct{ Name, Title, Version string } `json:"serverInfo"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(msg), &answer); resp.StatusCode != http.StatusOK || err != nil {
		t.Fatalf("initialize: %s %v\n%s", resp.Status, err, b)
	}
	return answer.Result.ServerInfo
}

// TestMountRefusesBrand: a brand that brand.Check refuses fails Mount, and says why.
func TestMountRefusesBrand(t *testing.T) {
	svc := newService(t, true)
	for _, tt := range []struct {
		b    brand.Brand
		want string
	}{
		{brand.Brand{Name: "Acme", Command: "acme", EnvPrefix: "acme"}, `doors: Options.Brand: the EnvPrefix "acme" is not allowed: it must be`},
		{brand.Brand{Name: "Acme", Command: "ACME", EnvPrefix: "ACME"}, `doors: Options.Brand: the Command "ACME" is not allowed`},
		{brand.Brand{Name: "", Command: "acme", EnvPrefix: "ACME"}, "doors: Options.Brand: the Name is empty"},
		{brand.Brand{Name: "Acme\u0007", Command: "acme", EnvPrefix: "ACME"}, "not printable"},
	} {
		mux := http.NewServeMux()
		m, err := doors.Mount(mux, svc, &doors.Options{Brand: tt.b})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			if m != nil {
				m.Close()
			}
			t.Errorf("%+v: Mount: %v, want an error with %q", tt.b, err, tt.want)
		}
	}
}
