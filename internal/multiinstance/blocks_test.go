package multiinstance_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing/blocks"
)

// TestExactBalanceWithBlocks is TestExactBalance with credit blocks on every instance:
// three instances spend one account's balance with thousands of concurrent calls,
// each serving the account's credits from blocks it reserves and rolls. Once the
// instances are closed (their blocks given back), the ledger holds exactly what the
// answered calls kept, and the refusals for credits came only near exhaustion: at
// most a few credits were left in the blocks of other instances (the bound of package
// billing/blocks) when the work ran out.
func TestExactBalanceWithBlocks(t *testing.T) {
	for _, d := range deployments() {
		t.Run(d.name, func(t *testing.T) {
			c := startWith(t, d, 3, func(o *tollgate.Options, s tollgate.Stores) {
				var err error
				if o.CreditBlocks, err = blocks.New(s.Ledger, &blocks.Options{Size: 100, Now: o.Now, Hold: tollgate.DefaultCallTimeout + tollgate.DefaultReservationGrace}); err != nil {
					t.Fatal(err)
				}
			})
			const credits, calls = 1000, 3000
			acct, _, key := c.account(t, "open", credits)
			var ok, refused atomic.Int64
			var wg sync.WaitGroup
			work := make(chan int)
			for range 48 {
				wg.Go(func() {
					for i := range work {
						switch r := c.call(t, i, "/v1/hash?text=x", key); {
						case r.status == http.StatusOK:
							ok.Add(1)
						case r.status == http.StatusTooManyRequests && r.code == "credits_exhausted":
							refused.Add(1)
						default:
							t.Errorf("call %d: %d %s %v", i, r.status, r.code, r.body)
						}
					}
				})
			}
			for i := range calls {
				work <- i
			}
			close(work)
			wg.Wait()
			for _, in := range c.instances {
				in.svc.Close() // gives the blocks back
			}
			if ok.Load()+refused.Load() != calls {
				t.Fatalf("%d succeeded and %d refused of %d calls", ok.Load(), refused.Load(), calls)
			}
			if ok.Load() < credits-3*blocks.DefaultShare {
				t.Errorf("%d calls succeeded for %d credits: blocks held back more than the bound", ok.Load(), credits)
			}
			for i := range c.instances {
				if b := c.balance(t, i, acct); b.Remaining != credits-ok.Load() || b.Used != ok.Load() {
					t.Errorf("instance %d sees %d remaining and %d used, want %d and %d", i, b.Remaining, b.Used, credits-ok.Load(), ok.Load())
				}
			}
			t.Logf("%d succeeded, %d refused for credits", ok.Load(), refused.Load())
		})
	}
}
