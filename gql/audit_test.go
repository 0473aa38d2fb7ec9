package gql_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
	"github.com/tollgate-dev/tollgate/gql"
	"github.com/tollgate-dev/tollgate/internal/testenv"
	"github.com/tollgate-dev/tollgate/store/memory"
)

// getOnlyAudits are the audits about GET requests. The gateway takes POST only and
// answers GET with 405, so these MAY audits can only be notices.
var getOnlyAudits = map[string]bool{"5A70": true, "D6D5": true, "6A70": true}

// TestGraphQLHTTPAudit runs the graphql-http audit suite (npm package graphql-http)
// against the gateway with a key, and requires no error and no warning, notices only
// for the GET audits, and no credit spent by the audits' probes.
func TestGraphQLHTTPAudit(t *testing.T) {
	dir := testenv.Var(t, testenv.NodeTools)
	testenv.NodeTool(t, "redocly") // node and the tools are installed
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		t.Fatal(err)
	}
	plans, _ := billing.NewPlans(billing.Plan{Name: "pro", Credits: 1000, GraphQLMaxAPIs: 10})
	stores := tollgate.Stores{Keys: memory.NewKeyStore(), Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}
	svc, err := tollgate.New(reg, stores, plans, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(svc.Close)
	mgr, err := accounts.New(svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)
	acct, _, key, err := mgr.CreateAccount(context.Background(), accounts.Spec{Plan: "pro"})
	if err != nil {
		t.Fatal(err)
	}
	h, err := gql.NewHandler(svc, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	cmd := exec.CommandContext(t.Context(), "node", filepath.Join(dir, "graphql-audit.mjs"), srv.URL+"/v1/graphql", key)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the audit failed to run: %v\n%s", err, stderr.String())
	}
	counts := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		var r struct{ ID, Name, Status, Reason string }
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("audit output %q: %v", sc.Text(), err)
		}
		counts[r.Status]++
		switch {
		case r.Status == "ok":
		case r.Status == "notice" && getOnlyAudits[r.ID]:
		default:
			t.Errorf("audit %s %q: %s: %s", r.ID, r.Name, r.Status, r.Reason)
		}
	}
	if counts["ok"] < 50 {
		t.Errorf("only %d audits passed: %v", counts["ok"], counts)
	}
	t.Logf("audit results: %v", counts)
	info, err := mgr.Account(context.Background(), acct.ID)
	if err != nil || info.Balance.Remaining != 1000 {
		t.Errorf("the audit spent credits: %+v (%v)", info.Balance, err)
	}
}
