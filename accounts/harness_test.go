package accounts_test

import (
	"context"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/accounts"
	"github.com/tollgate-dev/tollgate/audit"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/billing"
	"github.com/tollgate-dev/tollgate/billing/blocks"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/store/memory"
	"github.com/tollgate-dev/tollgate/usage"
)

// harness is a service on memory stores with one test API ("ok"), the manager of its
// accounts on the same stores, and one account ("acct") with its primary key. It has an
// audit log and usage statistics, wired as a host wires them, when its options ask.
type harness struct {
	svc    *tollgate.Service
	mgr    *accounts.Manager
	stores tollgate.Stores
	blocks *blocks.Blocks // nil unless harnessOptions.blocks is set
	key    string         // the value of acct's primary key
	// audit and usage are nil unless harnessOptions.audit and .usage are set.
	audit *audit.Log
	usage *usage.Recorder
}

type harnessOptions struct {
	plan billing.Plan
	// apis are registered beside "ok".
	apis []catalog.API
	// blocks, if set, are the options of credit blocks on the harness's ledger, given
	// to the service and to the manager.
	blocks *blocks.Options
	opts   tollgate.Options // the service's
	// accounts are the manager's options; its Audit and Usage are set from audit and
	// usage, and its Logger is opts.Logger unless it names one.
	accounts accounts.Options
	keys     auth.KeyStore // nil: memory.NewKeyStore()
	// audit, if set, is the store of an audit log (an audit.Log with auditOpts,
	// subscribed to the service's events) that the manager reads.
	audit     audit.Store
	auditOpts audit.LogOptions
	// usage, if set, is the store of usage statistics (a usage.Recorder with usageOpts,
	// subscribed to the service's events) that the manager reads.
	usage     usage.Store
	usageOpts usage.RecorderOptions
}

// newHarness returns a harness. The audit log and the recorder take the service's
// clock and logger (opts.Now, opts.Logger) unless their options name theirs. Everything
// it starts is closed when the test ends.
func newHarness(t *testing.T, ho harnessOptions) *harness {
	t.Helper()
	reg := &catalog.Registry{}
	if err := reg.Register(catalog.API{ID: "ok", Method: "GET", Cost: 1,
		Handler: catalog.HandlerFunc(func(context.Context, *catalog.Request) (any, error) {
			return map[string]any{}, nil
		})}); err != nil {
		t.Fatal(err)
	}
	for _, api := range ho.apis {
		if err := reg.Register(api); err != nil {
			t.Fatal(err)
		}
	}
	plan := ho.plan
	if plan.Name == "" {
		plan = billing.Plan{Name: "p", Credits: 100, RatePerMinute: 600, Concurrency: 10}
	}
	plans, err := billing.NewPlans(plan)
	if err != nil {
		t.Fatal(err)
	}
	keys := ho.keys
	if keys == nil {
		keys = memory.NewKeyStore()
	}
	h := &harness{stores: tollgate.Stores{Keys: keys, Ledger: memory.NewLedger(nil),
		Rates: memory.NewRateLimiter(), Slots: memory.NewConcurrencyLimiter()}}
	if ho.blocks != nil {
		if ho.opts.CreditBlocks, err = blocks.New(h.stores.Ledger, ho.blocks); err != nil {
			t.Fatal(err)
		}
		ho.accounts.CreditBlocks, h.blocks = ho.opts.CreditBlocks, ho.opts.CreditBlocks
	}
	if h.svc, err = tollgate.New(reg, h.stores, plans, &ho.opts); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.svc.Close)
	mo := ho.accounts
	if mo.Logger == nil {
		mo.Logger = ho.opts.Logger
	}
	if ho.audit != nil {
		lo := ho.auditOpts
		if lo.Now == nil {
			lo.Now = ho.opts.Now
		}
		if lo.Logger == nil {
			lo.Logger = ho.opts.Logger
		}
		h.audit = audit.NewLog(ho.audit, &lo)
		t.Cleanup(h.audit.Close)
		h.svc.Events().Subscribe(h.audit, h.audit.Kinds()...)
		mo.Audit = ho.audit
	}
	if ho.usage != nil {
		ro := ho.usageOpts
		if ro.Now == nil {
			ro.Now = ho.opts.Now
		}
		if ro.Logger == nil {
			ro.Logger = ho.opts.Logger
		}
		if h.usage, err = usage.NewRecorder(ho.usage, &ro); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { h.usage.Close(context.Background()) })
		h.svc.Events().Subscribe(h.usage, h.usage.Kinds()...)
		mo.Usage = ho.usage
	}
	if h.mgr, err = accounts.New(h.svc, &mo); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.mgr.Close)
	if _, _, h.key, err = h.mgr.CreateAccount(context.Background(), accounts.Spec{ID: "acct", Plan: plan.Name}); err != nil {
		t.Fatal(err)
	}
	return h
}

// caller is the harness account's caller over REST.
func (h *harness) caller() tollgate.Caller {
	return tollgate.Caller{Credential: auth.Credential{Kind: auth.APIKeyHeader, Value: h.key}, Channel: auth.ChannelREST}
}

// call calls the APIs with the given ids as one call of the harness account.
func (h *harness) call(ctx context.Context, ids []string) tollgate.Reply {
	return h.svc.CallAll(ctx, h.caller(), func() ([]tollgate.Item, error) {
		items := make([]tollgate.Item, len(ids))
		for i, id := range ids {
			items[i] = tollgate.Item{API: id, Input: tollgate.Input{JSON: map[string]any{}}}
		}
		return items, nil
	})
}

// success marks an expected success in tables of codes.
const success = tollgate.Code(255)

func mustRestrictions(t *testing.T, spec auth.RestrictionSpec) auth.Restrictions {
	t.Helper()
	r, err := auth.NewRestrictions(spec)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
