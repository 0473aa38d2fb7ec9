package multiinstance_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The balance in two parts of TestKilledInstance's grants variant, read and checked
// through the admin API of an instance run as a process.

// adminToken is the admin token of the instances run as processes.
const adminToken = "multiinstance-admin-token"

// killedAllowance is the plan's allowance in TestKilledInstance's grants variant.
const killedAllowance = 50

// A grantedBalance is an account opened with credits above its plan's allowance of
// killedAllowance (the rest a grant that never lapses), and granted lapsing more
// credits, which lapse a year later.
type grantedBalance struct {
	url, account string
	never        int64     // the grant that never lapses, at the opening
	lapse        time.Time // when the other grant lapses
	lapsing      int64     // its credits
}

// grantBalance grants the account, opened with credits, a lot of 80 credits lapsing in
// a year, through the admin API at url.
func grantBalance(t *testing.T, url, account string, credits int64) *grantedBalance {
	t.Helper()
	g := &grantedBalance{url: url, account: account, never: credits - killedAllowance,
		lapse: time.Now().UTC().Add(365 * 24 * time.Hour).Truncate(time.Second), lapsing: 80}
	body := fmt.Sprintf(`{"amount": %d, "reason": "bought", "expires_at": %q}`, g.lapsing, g.lapse.Format(time.RFC3339))
	var b adminBalance
	if err := adminDo(t.Context(), http.MethodPost, url+"/admin/v1/accounts/"+account+"/credits", body, &struct {
		Balance *adminBalance `json:"balance"`
	}{&b}); err != nil {
		t.Fatal(err)
	}
	g.want(t, "after the grant", b, adminBalance{Remaining: killedAllowance + g.never + g.lapsing, Granted: g.never + g.lapsing,
		AllowanceRemaining: killedAllowance, NextLapse: &nextLapse{g.lapse, g.lapsing}})
	return g
}

// adminBalance is data.balance of the admin API.
type adminBalance struct {
	Remaining          int64      `json:"remaining"`
	Granted            int64      `json:"granted"`
	AllowanceRemaining int64      `json:"allowance_remaining"`
	Used               int64      `json:"used"`
	NextLapse          *nextLapse `json:"next_lapse"`
}

type nextLapse struct {
	At      time.Time `json:"at"`
	Credits int64     `json:"credits"`
}

func (b adminBalance) String() string {
	lapse := "null"
	if b.NextLapse != nil {
		lapse = fmt.Sprintf("%d at %s", b.NextLapse.Credits, b.NextLapse.At.Format(time.RFC3339))
	}
	return fmt.Sprintf("{remaining %d, granted %d, allowance_remaining %d, used %d, next_lapse %s}",
		b.Remaining, b.Granted, b.AllowanceRemaining, b.Used, lapse)
}

// adminDo sends an admin API request, and decodes the data of its 200 answer into out.
func adminDo(ctx context.Context, method, url, body string, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+adminToken)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s %s", method, url, resp.Status, raw)
	}
	return json.Unmarshal(raw, &struct {
		Data any `json:"data"`
	}{out})
}

// balance reads the account's balance through the admin API.
func (g *grantedBalance) balance(t *testing.T) adminBalance {
	t.Helper()
	var info struct {
		Balance adminBalance `json:"balance"`
	}
	if err := adminDo(t.Context(), http.MethodGet, g.url+"/admin/v1/accounts/"+g.account, "", &info); err != nil {
		t.Fatal(err)
	}
	return info.Balance
}

func (g *grantedBalance) want(t *testing.T, when string, got, want adminBalance) {
	t.Helper()
	if got.String() != want.String() {
		t.Errorf("the balance %s: %s, want %s", when, got, want)
	}
}

// wantInFlight checks the balance while inFlight calls of one credit are in flight, and
// nothing else is: they took the whole allowance, then the rest from the lot that
// lapses, leaving the one that never lapses as it was.
func (g *grantedBalance) wantInFlight(t *testing.T, inFlight int64) {
	t.Helper()
	fromLot := inFlight - killedAllowance
	g.want(t, "with the calls in flight", g.balance(t), adminBalance{Remaining: g.never + g.lapsing - fromLot, Granted: g.never + g.lapsing - fromLot,
		Used: inFlight, NextLapse: &nextLapse{g.lapse, g.lapsing - fromLot}})
}

// reservation is what the ledger's journal says of a reservation: its amount, what it
// took from each lot (by expiry, in Unix nanoseconds; 0 for the lot that never lapses),
// and how it was closed ("settle", "refund", "expire", or "" while open).
type reservation struct {
	amount int64
	lots   map[int64]int64
	closed string
}

// journal reads the account's reservations from the ledger's journal in PostgreSQL.
func journal(t *testing.T, dsn, schema, account string) []reservation {
	t.Helper()
	ctx := t.Context()
	conn := connect(t, dsn)
	table := pgx.Identifier{schema, "tollgate_ledger"}.Sanitize()
	rows, err := conn.Query(ctx, `SELECT -r.amount, coalesce(r.lots, '[]'::jsonb),
	       coalesce((SELECT c.kind FROM `+table+` c WHERE c.account_id = r.account_id AND c.request_id = r.request_id
	                  AND c.kind IN ('settle', 'refund', 'expire')), '')
	  FROM `+table+` r WHERE r.account_id = $1 AND r.kind = 'reserve'`, account)
	if err != nil {
		t.Fatal(err)
	}
	var out []reservation
	for rows.Next() {
		var r reservation
		var lots []byte
		if err := rows.Scan(&r.amount, &lots, &r.closed); err != nil {
			t.Fatal(err)
		}
		var taken [][2]int64
		if err := json.Unmarshal(lots, &taken); err != nil {
			t.Fatalf("the lots of a reservation, %s: %v", lots, err)
		}
		r.lots = map[int64]int64{}
		for _, l := range taken {
			r.lots[l[0]] += l[1]
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantSettled checks the balance once every reservation is closed: inFlight voided ones
// (those of the killed instance), which had taken the allowance and then from the lot
// that lapses, as wantInFlight saw; and the survivors' served calls, settled, which kept
// charged credits in all. Whatever the order the voids and the survivors' calls took,
// each part is what it was less what the kept charges took from it, as the journal
// divides them: a void that gave back to the wrong part would show.
func (g *grantedBalance) wantSettled(t *testing.T, dsn, schema string, inFlight, charged, served int64) {
	t.Helper()
	lapse := g.lapse.UnixNano()
	var voided, kept struct{ allowance, lapsing, never, n int64 }
	for _, r := range journal(t, dsn, schema, g.account) {
		part := &kept
		switch r.closed {
		case "expire":
			part = &voided
		case "settle":
		default:
			t.Errorf("a reservation closed %q, want every one settled or voided, none refunded", r.closed)
			continue
		}
		fromLots := r.lots[lapse] + r.lots[0]
		if len(r.lots) > 2 || fromLots > r.amount {
			t.Errorf("a reservation of %d took %v from the lots: a lot the account does not have, or more than its amount", r.amount, r.lots)
		}
		part.n++
		part.allowance += r.amount - fromLots
		part.lapsing += r.lots[lapse]
		part.never += r.lots[0]
	}
	if voided.n != inFlight || voided.allowance != killedAllowance || voided.lapsing != inFlight-killedAllowance || voided.never != 0 {
		t.Errorf("the journal's voided reservations: %+v; want the %d of the killed instance, %d from the allowance and the rest from the lot that lapses",
			voided, inFlight, killedAllowance)
	}
	if kept.n != served || kept.allowance+kept.lapsing+kept.never != charged {
		t.Errorf("the journal's settled reservations: %+v; want the %d calls answered, which were charged %d", kept, served, charged)
	}
	want := adminBalance{Remaining: killedAllowance + g.never + g.lapsing - charged, Granted: g.never + g.lapsing - kept.lapsing - kept.never,
		AllowanceRemaining: killedAllowance - kept.allowance, Used: charged}
	if left := g.lapsing - kept.lapsing; left > 0 {
		want.NextLapse = &nextLapse{g.lapse, left}
	}
	got := g.balance(t)
	g.want(t, "in the end", got, want)
	t.Logf("in the end: %s; the survivors' charges kept %d of the allowance, %d of the lot that lapses and %d of the one that never does",
		got, kept.allowance, kept.lapsing, kept.never)
}
