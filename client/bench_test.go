package client_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// BenchmarkValidate measures the client-side validation of one call: what every call
// costs before it is sent.
//
//	go test -run '^$' -bench Validate -benchmem ./client
func BenchmarkValidate(b *testing.B) {
	c, err := client.New(testserver.PrimaryKey, &client.Options{Catalog: apis.All()})
	if err != nil {
		b.Fatal(err)
	}
	cases := []struct {
		api    string
		params map[string]any
	}{
		{"hash", map[string]any{"text": "hello", "algorithm": "sha256"}},
		{"hmac", map[string]any{"message": "hello", "secret": "key", "algorithm": "sha512", "encoding": "base64"}},
		{"uuid-generator", map[string]any{"count": 10}},
		{"date-info", map[string]any{"date": "2024-02-29"}},
	}
	for _, bc := range cases {
		b.Run(bc.api, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := c.Validate(b.Context(), bc.api, bc.params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkExecute measures a whole call to a loopback server that answers at once,
// for scale: the validation above is a small part of it.
func BenchmarkExecute(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"status":"ok","error":null,"data":{"algorithm":"sha256","hash":"2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"}}`)
	}))
	b.Cleanup(srv.Close)
	c, err := client.New(testserver.PrimaryKey, &client.Options{BaseURL: srv.URL, Catalog: apis.All()})
	if err != nil {
		b.Fatal(err)
	}
	params := map[string]any{"text": "hello", "algorithm": "sha256"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.Execute(b.Context(), "hash", params); err != nil {
			b.Fatal(err)
		}
	}
}
