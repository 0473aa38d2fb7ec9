package multiinstance_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/admin"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/rest"
)

// TestBadInputOnEveryStore sends, on every deployment, what a store cannot hold or
// count: a NUL byte or invalid UTF-8 in an account id, a key id, a key name or a
// reason, and credits past 2^53-1 in an account's creation or a grant. Every one is
// answered 400 with a message that names the field or the limit, never 503, and
// changes nothing; and a refund that brings a balance to the limit lands on it exactly.
func TestBadInputOnEveryStore(t *testing.T) {
	for _, d := range deployments() {
		t.Run(d.name, func(t *testing.T) {
			reg := &catalog.Registry{}
			fail := catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
				return nil, errors.New("the backend is down")
			})
			if err := reg.Register(catalog.API{ID: "fail", Method: http.MethodGet, Cost: 3, Handler: fail}); err != nil {
				t.Fatal(err)
			}
			quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
			stores := d.stores(t)
			svc, err := tollgate.New(reg, stores, plans, &tollgate.Options{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(svc.Close)
			mgr, err := accounts.New(svc, &accounts.Options{Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(mgr.Close)
			const token = "edge-test-admin-token"
			adm, err := admin.NewHandler(mgr, token, nil)
			if err != nil {
				t.Fatal(err)
			}
			api, err := rest.NewHandler(svc, &rest.Options{Accounts: mgr, Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			mux := http.NewServeMux()
			mux.Handle("/admin/", adm)
			mux.Handle("/v1/", api)
			srv := httptest.NewServer(mux)
			t.Cleanup(srv.Close)
			do := func(method, path, body string, header ...string) (int, string, http.Header) {
				t.Helper()
				req, err := http.NewRequestWithContext(t.Context(), method, srv.URL+path, strings.NewReader(body))
				if err != nil {
					t.Fatal(err)
				}
				req.Header.Set("Authorization", "Bearer "+token)
				req.Header.Set("Content-Type", "application/json")
				for i := 0; i+1 < len(header); i += 2 {
					req.Header.Set(header[i], header[i+1])
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b), resp.Header
			}

			acct, key, value, err := mgr.CreateAccount(t.Context(), accounts.Spec{Plan: "open"})
			if err != nil {
				t.Fatal(err)
			}
			base := "/admin/v1/accounts/" + acct.ID
			for _, tc := range []struct {
				name, method, path, body, mention string
			}{
				{"NUL in an account id", "GET", "/admin/v1/accounts/a%00b", "", "account_id"},
				{"invalid UTF-8 in an account id", "GET", "/admin/v1/accounts/%ff%fe", "", "account_id"},
				{"NUL in a key id", "POST", "/admin/v1/keys/k%00/rotate", "", "key_id"},
				{"invalid UTF-8 in a key id", "POST", "/admin/v1/keys/%ff%fe/revoke", "", "key_id"},
				{"NUL in a new account's id", "POST", "/admin/v1/accounts", `{"id":"a\u0000b","plan":"open"}`, "id"},
				{"NUL in a key name", "POST", base + "/keys", `{"name":"ci\u0000"}`, "name"},
				{"a line break in a key name", "POST", base + "/keys", `{"name":"ci\nfake log line"}`, "name"},
				{"NUL in a reason", "POST", base + "/credits", `{"amount":5,"reason":"bonus\u0000"}`, "reason"},
				{"credits past 2^53-1 at creation", "POST", "/admin/v1/accounts", `{"plan":"open","credits":9007199254740992}`, "9007199254740991"},
				{"a grant of 2^63-1", "POST", base + "/credits", `{"amount":9223372036854775807,"reason":"max"}`, "9007199254740991"},
				{"a take of -2^63", "POST", base + "/credits", `{"amount":-9223372036854775808,"reason":"min"}`, "9007199254740991"},
				{"a grant past 2^53-1 in all", "POST", base + "/credits", `{"amount":9007199254740000,"reason":"too much"}`, "9007199254740991"},
			} {
				status, body, _ := do(tc.method, tc.path, tc.body)
				if status != http.StatusBadRequest || !strings.Contains(body, tc.mention) {
					t.Errorf("%s: %d %s, want 400 naming %q", tc.name, status, body, tc.mention)
				}
			}
			info, err := mgr.Account(t.Context(), acct.ID)
			if err != nil {
				t.Fatal(err)
			}
			if info.Balance.Remaining != 1_000_000 || len(info.Keys) != 1 || info.Keys[0].ID != key.ID {
				t.Errorf("after the refused requests: balance %+v, keys %v; want them unchanged", info.Balance, info.Keys)
			}

			// The grant that brings remaining plus used to 2^53-1 exactly is taken, and a
			// refund then lands on the limit: no overflow, no wrap.
			grant := strconv.FormatInt(billing.MaxCredits-1_000_000, 10)
			if status, body, _ := do("POST", base+"/credits", `{"amount":`+grant+`,"reason":"to the limit"}`); status != http.StatusOK {
				t.Fatalf("grant to the limit: %d %s", status, body)
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, srv.URL+"/v1/fail", nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Api-Key", value)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusInternalServerError || resp.Header.Get("X-Credits-Cost") != "0" ||
				resp.Header.Get("X-Credits-Remaining") != strconv.FormatInt(billing.MaxCredits, 10) {
				t.Errorf("a refunded call at the limit: %d, cost %s, remaining %s; want 500, 0 and %d", resp.StatusCode,
					resp.Header.Get("X-Credits-Cost"), resp.Header.Get("X-Credits-Remaining"), int64(billing.MaxCredits))
			}
			_, body, _ := do("GET", base, "")
			var got struct {
				Data struct {
					Balance struct {
						Remaining int64 `json:"remaining"`
					} `json:"balance"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(body), &got); err != nil || got.Data.Balance.Remaining != billing.MaxCredits {
				t.Errorf("the balance read through the admin API: %s (%v), want remaining %d", body, err, int64(billing.MaxCredits))
			}
		})
	}
}
