package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/usage"
)

// UsageStore is the PostgreSQL [usage.Store]: usage buckets in the tables
// tollgate_usage_minute, tollgate_usage_hour and tollgate_usage_day, the same hour and
// day sums narrowed to one dimension in tollgate_usage_{hour,day}_{api,key} (see
// [usage.RollupBy]), and the last use of each key in tollgate_usage_last.
//
// Add is one transaction of eight upserts (the minute, hour and day rows, the narrowed
// hour and day rows and the keys' last use), additive, so flushes from any number of
// instances sum; each upsert writes its rows in one order (bucket, account, key, API,
// channel, outcome), so that concurrent flushes lock rows in the same order and do not
// deadlock. Sum is one SELECT on the primary key (account, bucket, ...) of the
// narrowest table that holds what the query asks for (a month of an account's usage per
// API per day reads one row per API, outcome and day, however many keys and channels
// it used), whose rows are summed as they are read, so its memory is that of the
// result; Totals is one statement that sums a range of every account (on a btree of the
// bucket) in the table of the coarsest buckets that cover it, narrowed to the API
// unless it asks for channels, and ranks the groups; Prune is one statement that
// deletes on a BRIN index of the bucket.
//
// Like [Store], it holds no state besides its DB and is safe for concurrent use when
// its DB is. Create it with [NewUsageStore], after [Migrate] has run.
type UsageStore struct {
	db DB
}

// Interface guard.
var _ usage.Store = (*UsageStore)(nil)

// NewUsageStore returns a UsageStore on db. It does not touch the database: run
// [Migrate] first.
func NewUsageStore(db DB) (*UsageStore, error) {
	if db == nil {
		return nil, errors.New("postgres: NewUsageStore needs a DB (a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx)")
	}
	return &UsageStore{db: db}, nil
}

// usageTable returns the table of res's buckets.
func usageTable(res usage.Resolution) string {
	switch res {
	case usage.Minute:
		return "tollgate_usage_minute"
	case usage.Hour:
		return "tollgate_usage_hour"
	}
	return "tollgate_usage_day"
}

// narrowed are the dimensions that hour and day buckets are also kept narrowed to, and
// the suffix of their tables' names.
var narrowed = []struct {
	keep   usage.Dimension
	suffix string
}{{usage.ByAPI, "_api"}, {usage.ByKey, "_key"}}

// sumTable returns the narrowest table that holds the rows q (normalized) reads: the
// table narrowed to the API when q neither groups nor filters by key or channel, the one
// narrowed to the key when it neither groups nor filters by API or channel, else the
// full table of its interval.
func sumTable(q usage.Query) string {
	table := usageTable(q.Interval)
	if q.Interval == usage.Minute || q.Channel != "" || q.By == usage.ByChannel {
		return table
	}
	switch {
	case q.Key == "" && q.By != usage.ByKey:
		return table + "_api"
	case q.API == "" && q.By != usage.ByAPI:
		return table + "_key"
	}
	return table
}

// Add adds rows to the minute, hour and day tables and raises their keys' last use, in
// one transaction.
func (s *UsageStore) Add(ctx context.Context, rows []usage.Row) error {
	minutes, hours, days, err := usage.CheckAdd(rows)
	if err != nil || len(minutes) == 0 {
		return err
	}
	tx, err := s.db.Begin(ctx)
	if err != nil {
		return wrapErr(ctx, err, "usage: add %d rows: begin", len(minutes))
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) // a no-op after Commit
	type level struct {
		table string
		rows  []usage.Row
	}
	levels := []level{{usageTable(usage.Minute), minutes}, {usageTable(usage.Hour), hours}, {usageTable(usage.Day), days}}
	for _, n := range narrowed {
		levels = append(levels,
			level{usageTable(usage.Hour) + n.suffix, usage.RollupBy(hours, usage.Hour, n.keep)},
			level{usageTable(usage.Day) + n.suffix, usage.RollupBy(days, usage.Day, n.keep)})
	}
	for _, l := range levels {
		if err := upsertUsage(ctx, tx, l.table, l.rows); err != nil {
			return wrapErr(ctx, err, "usage: add %d rows to %s for account %q", len(l.rows), l.table, l.rows[0].Account)
		}
	}
	if err := upsertLastUsed(ctx, tx, minutes); err != nil {
		return wrapErr(ctx, err, "usage: raise the last use of keys")
	}
	if err := tx.Commit(ctx); err != nil {
		return wrapErr(ctx, err, "usage: add %d rows: commit", len(minutes))
	}
	return nil
}

// upsertUsage adds rows (sorted by primary key, one per key) to table.
func upsertUsage(ctx context.Context, db DB, table string, rows []usage.Row) error {
	n := len(rows)
	var (
		buckets, lasts                       = make([]time.Time, n), make([]time.Time, n)
		accounts, keys, apis, chans, outs, l = make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		calls, credits                       = make([]int64, n), make([]int64, n)
	)
	for i := range rows {
		r := &rows[i]
		buckets[i], lasts[i] = r.Bucket, r.Last
		accounts[i], keys[i], apis[i], chans[i], outs[i] = r.Account, r.Key, r.API, r.Channel, r.Outcome
		calls[i], credits[i] = r.Calls, r.Credits
		l[i] = histLiteral(r.Latency.Trimmed())
	}
	// The table name is one of the constants above. unnest keeps the arrays' order, which
	// is the primary key's (Rollup sorted them).
	_, err := db.Exec(ctx, `INSERT INTO `+table+` AS t (account_id, bucket, key_id, api, channel, outcome, calls, credits, latency, last_at)
		SELECT account_id, bucket, key_id, api, channel, outcome, calls, credits, latency::bigint[], last_at
		FROM unnest($1::text[], $2::timestamptz[], $3::text[], $4::text[], $5::text[], $6::text[], $7::bigint[], $8::bigint[], $9::text[], $10::timestamptz[])
			WITH ORDINALITY AS r(account_id, bucket, key_id, api, channel, outcome, calls, credits, latency, last_at, n)
		ORDER BY n
		ON CONFLICT (account_id, bucket, key_id, api, channel, outcome) DO UPDATE SET
			calls = t.calls + excluded.calls,
			credits = t.credits + excluded.credits,
			latency = tollgate_usage_hist_add(t.latency, excluded.latency),
			last_at = greatest(t.last_at, excluded.last_at)`,
		accounts, buckets, keys, apis, chans, outs, calls, credits, l, lasts)
	return err
}

// upsertLastUsed raises the last use of the keys of rows.
func upsertLastUsed(ctx context.Context, db DB, rows []usage.Row) error {
	type key struct{ account, id string }
	last := make(map[key]time.Time)
	for i := range rows {
		r := &rows[i]
		if r.Key == "" {
			continue
		}
		k := key{r.Account, r.Key}
		if t, ok := last[k]; !ok || r.Last.After(t) {
			last[k] = r.Last
		}
	}
	if len(last) == 0 {
		return nil
	}
	ks := make([]key, 0, len(last))
	for k := range last {
		ks = append(ks, k)
	}
	slices.SortFunc(ks, func(a, b key) int {
		if c := strings.Compare(a.account, b.account); c != 0 {
			return c
		}
		return strings.Compare(a.id, b.id)
	})
	accounts, ids, ats := make([]string, len(ks)), make([]string, len(ks)), make([]time.Time, len(ks))
	for i, k := range ks {
		accounts[i], ids[i], ats[i] = k.account, k.id, last[k]
	}
	_, err := db.Exec(ctx, `INSERT INTO tollgate_usage_last AS t (account_id, key_id, last_at)
		SELECT account_id, key_id, last_at
		FROM unnest($1::text[], $2::text[], $3::timestamptz[]) WITH ORDINALITY AS r(account_id, key_id, last_at, n)
		ORDER BY n
		ON CONFLICT (account_id, key_id) DO UPDATE SET last_at = greatest(t.last_at, excluded.last_at)`,
		accounts, ids, ats)
	return err
}

// histLiteral returns counts as a PostgreSQL array literal.
func histLiteral(counts []int64) string {
	b := make([]byte, 0, 2+4*len(counts))
	b = append(b, '{')
	for i, c := range counts {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, c, 10)
	}
	return string(append(b, '}'))
}

// Sum reads the rows of q's account, interval and range that match its filters, and
// sums them as they come.
func (s *UsageStore) Sum(ctx context.Context, q usage.Query) ([]usage.Row, error) {
	sum, err := usage.NewSummer(q)
	if err != nil {
		return nil, err
	}
	q = sum.Query()
	rows, err := s.db.Query(ctx, `SELECT bucket, key_id, api, channel, outcome, calls, credits, latency, last_at
		FROM `+sumTable(q)+`
		WHERE account_id = $1 AND bucket >= $2 AND bucket < $3
		  AND ($4 = '' OR api = $4) AND ($5 = '' OR key_id = $5) AND ($6 = '' OR channel = $6)`,
		q.Account, q.From, q.To, q.API, q.Key, q.Channel)
	if err != nil {
		return nil, wrapErr(ctx, err, "usage: sum account %q", q.Account)
	}
	defer rows.Close()
	r := usage.Row{Account: q.Account}
	var lat []int64
	for rows.Next() {
		if err := rows.Scan(&r.Bucket, &r.Key, &r.API, &r.Channel, &r.Outcome, &r.Calls, &r.Credits, &lat, &r.Last); err != nil {
			return nil, wrapErr(ctx, err, "usage: sum account %q", q.Account)
		}
		r.Latency = usage.HistogramOf(lat)
		if err := sum.Add(&r); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr(ctx, err, "usage: sum account %q", q.Account)
	}
	out := sum.Rows()
	for i := range out {
		out[i].Bucket, out[i].Last = out[i].Bucket.UTC(), out[i].Last.UTC()
	}
	return out, nil
}

// totalsTable returns the table that a totals query (normalized) of buckets of res
// reads: the hour or day table narrowed to the API unless it groups or filters by
// channel, which only the full tables keep; the minute table for minutes.
func totalsTable(q usage.TotalsQuery, res usage.Resolution) string {
	table := usageTable(res)
	if res == usage.Minute || q.GroupBy == usage.ByChannel || q.Channel != "" {
		return table
	}
	return table + "_api"
}

// totalsColumns are the columns of the groupings and filters of totals queries.
var totalsColumns = map[usage.Dimension]string{
	usage.ByAccount: "account_id", usage.ByAPI: "api", usage.ByChannel: "channel", usage.ByOutcome: "outcome",
}

// Totals returns a page of q's ranking in one statement: the rows of the range and
// filters are summed per group (a GROUP BY over the buckets of the query's resolution,
// which the range reaches through an index on the bucket, or through the primary key
// for one account), and the statement answers the sums of every group together and the
// groups that rank after the cursor's position, a page and one more. Groups compare in
// byte order (COLLATE "C"), as every store ranks them.
func (s *UsageStore) Totals(ctx context.Context, q usage.TotalsQuery) (usage.TotalsPage, error) {
	rk, err := usage.NewRanking(q)
	if err != nil {
		return usage.TotalsPage{}, err
	}
	q = rk.Query()
	sql, args := totalsSQL(rk)
	rows, err := s.db.Query(ctx, sql, args...)
	if err != nil {
		return usage.TotalsPage{}, wrapErr(ctx, err, "usage: totals by %s", q.GroupBy)
	}
	defer rows.Close()
	var (
		page   []usage.GroupTotals
		sum    usage.Totals
		groups int64
	)
	for rows.Next() {
		var (
			total bool
			g     usage.GroupTotals
			n     int64
		)
		if err := rows.Scan(&total, &g.Group, &g.Calls, &g.Credits, &g.Errors, &n); err != nil {
			return usage.TotalsPage{}, wrapErr(ctx, err, "usage: totals by %s", q.GroupBy)
		}
		if total {
			sum, groups = g.Totals, n
			continue
		}
		page = append(page, g)
	}
	if err := rows.Err(); err != nil {
		return usage.TotalsPage{}, wrapErr(ctx, err, "usage: totals by %s", q.GroupBy)
	}
	return rk.PageOf(page, sum, groups), nil
}

// totalsSQL returns the statement of a totals query and its arguments. It answers a
// first row (true) with the sums of every group together and the number of groups,
// then (false) the groups after the position, a page and one more.
func totalsSQL(rk *usage.Ranking) (string, []any) {
	q := rk.Query()
	args := []any{q.From, q.To}
	where := "bucket >= $1 AND bucket < $2"
	for _, f := range []struct{ col, v string }{
		{"account_id", q.Account}, {"api", q.API}, {"channel", q.Channel}, {"outcome", q.Outcome},
	} {
		if f.v != "" {
			args = append(args, f.v)
			where += fmt.Sprintf(" AND %s = $%d", f.col, len(args))
		}
	}
	figure := string(q.Order) // calls or credits: a column of g below
	after := ""
	if p, ok := rk.After(); ok {
		args = append(args, p.Value, p.Group)
		after = fmt.Sprintf(`WHERE %[1]s < $%[2]d OR %[1]s = $%[2]d AND grp > $%[3]d COLLATE "C"`, figure, len(args)-1, len(args))
	}
	args = append(args, q.Limit+1)
	// The names of the table, the columns and the figure are constants above; the
	// values are arguments.
	return `WITH g AS (
			SELECT ` + totalsColumns[q.GroupBy] + ` COLLATE "C" AS grp, sum(calls)::bigint AS calls, sum(credits)::bigint AS credits,
				coalesce(sum(calls) FILTER (WHERE outcome <> 'ok'), 0)::bigint AS errors
			FROM ` + totalsTable(q, rk.Resolution()) + `
			WHERE ` + where + `
			GROUP BY 1)
		SELECT true, '', coalesce(sum(calls), 0)::bigint, coalesce(sum(credits), 0)::bigint, coalesce(sum(errors), 0)::bigint, count(*) FROM g
		UNION ALL
		(SELECT false, grp, calls, credits, errors, 0 FROM g ` + after + `
		 ORDER BY ` + figure + ` DESC, grp COLLATE "C" LIMIT $` + fmt.Sprint(len(args)) + `)`, args
}

// LastUsed returns the last use of each of account's keys, in one SELECT.
func (s *UsageStore) LastUsed(ctx context.Context, account string) (map[string]time.Time, error) {
	rows, err := s.db.Query(ctx, `SELECT key_id, last_at FROM tollgate_usage_last WHERE account_id = $1`, account)
	if err != nil {
		return nil, wrapErr(ctx, err, "usage: last use of the keys of account %q", account)
	}
	defer rows.Close()
	out := make(map[string]time.Time)
	for rows.Next() {
		var (
			key string
			at  time.Time
		)
		if err := rows.Scan(&key, &at); err != nil {
			return nil, wrapErr(ctx, err, "usage: last use of the keys of account %q", account)
		}
		out[key] = at.UTC()
	}
	if err := rows.Err(); err != nil {
		return nil, wrapErr(ctx, err, "usage: last use of the keys of account %q", account)
	}
	return out, nil
}

// Prune deletes the buckets of res that start before before, in one statement.
func (s *UsageStore) Prune(ctx context.Context, res usage.Resolution, before time.Time) (int64, error) {
	if err := usage.CheckPrune(res); err != nil {
		return 0, err
	}
	// The narrowed tables of res are pruned in the same statement; the count is that
	// of the full table's rows.
	with := ""
	if res != usage.Minute {
		var ctes []string
		for i, n := range narrowed {
			ctes = append(ctes, fmt.Sprintf("n%d AS (DELETE FROM %s%s WHERE bucket < $1)", i, usageTable(res), n.suffix))
		}
		with = "WITH " + strings.Join(ctes, ", ") + " "
	}
	tag, err := s.db.Exec(ctx, with+`DELETE FROM `+usageTable(res)+` WHERE bucket < $1`, before)
	if err != nil {
		return 0, wrapErr(ctx, err, "usage: prune %s buckets before %s", res, before.Format(time.RFC3339Nano))
	}
	return tag.RowsAffected(), nil
}
