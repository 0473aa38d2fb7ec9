// Package redis keeps Tollgate's state in Redis (go-redis v9): rate limits, concurrency
// leases, and, if the host wants, accounts, keys and credit balances. One [*Store]
// implements every store interface ([auth.KeyStore], [driver.KeyChecker],
// [driver.Ledger], [driver.RateLimiter], [driver.ConcurrencyLimiter]), the
// [driver.Admitter], so that a paid call costs exactly one round trip to admit and one
// to settle, and the [driver.Sweeper], through which every instance voids expired
// reservations. It is also an [auth.SessionStore]: a signed-out session is one key,
// "<prefix>:ended-session:<id>", which Redis deletes at the session's expiry; and an
// [idempotency.Store]: the record of a batch sent with an idempotency key is one hash,
// "<prefix>:idem:<id>" (the hash of the account and the client's key, never the key
// itself), claimed by one script and marked, completed or abandoned by another, judged
// on the caller's clock, and deleted by Redis a second after its expiry.
//
// # Compositions
//
// Give the one Store the roles it should play:
//
//	rs, err := redis.New(client, nil)
//	// Limits in Redis; keys and money in PostgreSQL (the safe configuration):
//	stores := tollgate.Stores{Keys: pg, Ledger: pg, Rates: rs, Slots: rs}
//	// Everything in Redis (read "Durability" first):
//	stores = tollgate.Stores{Keys: rs, Ledger: rs, Rates: rs, Slots: rs}
//
// The Service's meter sends all the parts one Store holds in one step: with limits only,
// the Redis step is the rate limit and the slot; with everything, it is also the key
// check and the credit reservation.
//
// # Key layout
//
// Every key begins with Options.Prefix ("tollgate" by default) and a colon. The keys of
// one account share the hash tag {account}, so that they hash to one Redis Cluster
// slot and every script runs on one node:
//
//	<prefix>:{<account>}:acct        string  the account record (JSON)
//	<prefix>:{<account>}:keys        hash    the key records: <id>:h (current hash, hex),
//	                                         <id>:rec (JSON), <id>:rot and <id>:rev (RFC 3339),
//	                                         <id>:v (the revision; absent for 0); and krev
//	                                         ("1"), once krev holds every revoked key
//	<prefix>:{<account>}:korder      list    the key ids, oldest first
//	<prefix>:{<account>}:krev        zset    revoked key id -> its revocation (Unix µs)
//	<prefix>:{<account>}:bal         hash    rem, used, allow, the period (ps, pe, Unix µs),
//	                                         nx: at most the earliest deadline of an
//	                                         open reservation (Unix µs), if there is one,
//	                                         and the account's place in :expiring: its
//	                                         epoch (ie) and a bound (ix, Unix µs)
//	<prefix>:{<account>}:use         hash    API id -> calls counted in the period
//	<prefix>:{<account>}:tat         string  the rate limit's timestamp, "<Unix s> <ns>"
//	<prefix>:{<account>}:lease       zset    request id -> end of its lease (Unix µs)
//	<prefix>:{<account>}:open        zset    request id -> deadline of its open
//	                                         reservation (Unix µs)
//	<prefix>:{<account>}:r:<request> string  the request's marker: "o <amount> <period>
//	                                         <APIs>" (open reservation, the APIs joined
//	                                         by byte 0x1f), "d" (settled, or an
//	                                         adjustment), "v" (voided at its deadline),
//	                                         "a" (admitted without credits)
//	<prefix>:kid:<key id>            string  key id -> account
//	<prefix>:h:<key hash, hex>       string  key hash -> account and key id
//	<prefix>:revoked                 zset    account and key id (as in :h:) -> the
//	                                         revocation (Unix µs) of a key, but a primary
//	                                         key: the keys a prune must look at
//	<prefix>:{~x<n>}:expiring        zset    a shard of the index of expiring accounts
//	                                         (16, each account's in the one a hash of
//	                                         its id picks): "<account>\x00<epoch>" -> at
//	                                         most its earliest deadline, the accounts a
//	                                         sweep must look at
//	<prefix>:{~x<n>}:sweeping        string  the shard's lease: the token of the
//	                                         instance sweeping it (expires after 10s)
//	<prefix>:expiring                zset    the index of earlier versions, one key:
//	                                         sweeps still drain it
//
// For the rate and concurrency limiters, <account> is their key argument. An id that
// cannot be a hash tag as it is (empty, or containing '}') or that begins with '~' is
// written as '~' and its bytes in hexadecimal.
//
// Two lookups cannot live in the account's slot, because they are how the account is
// found: a key by its id (Key, RotateKey, RevokeKey) and by its hash (Resolve). Each
// is a global index entry, read with a single-key command, that names a candidate; the
// record in the account's slot is the truth. Resolve reads the index, then, in one
// script in the account's slot, checks that the key's current hash is the one looked up
// (two round trips). So an index entry that no record backs (a creation or a rotation
// that stopped half-way) never resolves; it only keeps its own random id or hash from
// being used again. Creating a key claims its id and hash with SET NX, then writes the
// record in one script, which refuses a taken account id or a missing account; the
// claims are withdrawn if it does. RotateKey claims the new hash (SET NX; a taken hash
// is a conflict), replaces the hash in the record in one script (refusing a revoked
// key), then deletes the old hash's entry: the old value is dead from the moment the
// record changes, since every reader compares with the record, and the new value works
// from that same moment, since its entry was written first.
//
// Bounds on an account's keys. Keys lists a page in one script: the cursor's key is
// found in korder with LPOS (Redis 6.0.6 or later), and the page read after it.
// CreateKey under a limit counts the account's keys that count in the script that
// writes the record: LLEN of korder less the keys that krev holds with a revocation
// before the limit's instant. A revocation adds the key to krev in its script, then to
// :revoked with a command of its own (if Redis fails in between, the key is left out of
// :revoked and never pruned, though it stops counting all the same). PruneKeys reads
// :revoked in batches, deletes each account's keys revoked before its instant in one
// script (their fields, korder and krev entries; never a primary key), then their :kid:
// and :h: entries, then the batch's entries of :revoked. An account stored by an older
// version of this package has no field krev: its first creation under a limit indexes
// its revoked keys, at their own revocation moments, in krev and :revoked (once), then
// creates the key.
//
// # Scripts
//
// Every operation is one Lua script or one command, atomic in Redis, loaded on first use
// (EVALSHA, falling back to EVAL once). The scripts are the files of lua/, embedded in
// the package, each headed by its keys, arguments and reply. Every script declares in
// KEYS every key it touches, all in one slot. The two scripts of the hot path, admission and closing,
// take steps: one run of the script performs, in order, the steps of every call of
// one account that go out in one pipeline (see "Pipelines"), each exactly as it would
// alone.
//
//   - Admit, the admission step: if the request's marker exists, the step was admitted
//     before and is admitted again, taking nothing. Otherwise it checks, in order, the
//     key (the record has this hash and is not revoked; with no key id, the account
//     exists), the rate limit (GCRA), the slot (ZCOUNT the live leases; only when they
//     have reached the ceiling are ended leases dropped with ZREMRANGEBYSCORE, and the
//     step refused unless the request already holds one) and the credits (void the
//     account's reservations past their deadline if nx says one is; renew the balance
//     if its period has ended; refuse if it is short). Only when every part allows the
//     call does it write: the new timestamp, ZADD of the lease, the debit, the usage
//     counts, the marker and the deadline. A refused step changes nothing but what any
//     operation may do (drop ended leases, renew, void). A run reads the clock, the key
//     records, the timestamp, the number of live leases and the balance once, carries
//     them from step to step as the steps change them, and writes what the admitted
//     steps changed together (the timestamp, the lease set's lifetime, the debit, the
//     usage counts, the deadlines and nx) once, at the end: only the markers and the
//     leases are written step by step, and a step that voids first writes what the
//     steps before it changed, as they would have. No step reads what is written at the
//     end, and the run is atomic, so it does exactly what the steps would do one after
//     the other. The replay check costs no command of its own where it can: a step is
//     decided first as a new one; if every part allows it, its marker is written with
//     SET NX GET, which also says whether it existed; if a part refuses it, EXISTS
//     looks the marker up. A marker that exists makes the step a replay, decided again
//     as one (nothing was written for it yet, and what the first decision may have done,
//     dropping ended leases, voiding, renewing, a replay does as well). A step's
//     arguments are its request id and one string of its parameters (the key, the
//     limits, the reservation), which the calls of one account nearly always share: a
//     step passes them only when they differ from the step's before in its run (an
//     empty string otherwise), and the run reads them only then (a closing's arguments
//     likewise).
//   - Close, the settlement: ZREM the lease and the deadline, and settle the reservation
//     at most once. One SET of the marker to "d" with XX and GET settles it and reads
//     what it held: an unknown reservation stays unknown; a voided one ("v") stays
//     voided and answers driver.ErrVoided; a marker that held no open reservation
//     ("d", or "a" if the request was admitted without credits) stays or becomes "d",
//     and is remembered for another Retention; a refund larger than the amount reserved is
//     refused and the marker put back, the reservation open again for another
//     [OpenReservationTTL]; so is one that would take the remaining credits past
//     2^63-1, which HINCRBY refuses (caught with redis.pcall, so that the run does not
//     stop half-way). The refund is credited, and the APIs uncounted, only if the
//     reservation was made in the current period. A run frees the leases of all its
//     steps with one ZREM and reads the balance once. Settle runs the same script, a
//     run of one step; a Close that only frees the slot is one ZREM.
//   - The plain methods (Reserve, Settle, Adjust, Balance, Usage, Open, Allow, Peek,
//     Acquire, Renew, InUse, CheckKey, Keys) are one script each, Release and Account
//     one command. Key management is off the call path and takes a few round trips:
//     Key, Resolve and RevokeKey two (the index, then the record), CreateAccount and
//     CreateKey three, RotateKey four.
//
// Redis runs the whole text of a script on every call, in one thread that every
// instance shares, so the two scripts of the hot path are written for its CPU: they
// define few functions (each is a closure created on every call), convert between
// numbers and strings as little as Lua allows, and take many calls' steps in one run,
// which pays once for what the steps share: the script's invocation, the account's
// reads and most of its writes (see lua/admit.lua, and the notes in bench_test.go).
// Measured with callgrind on Redis 7.0 (BenchmarkRuns), a paid call with every part
// in Redis (key check, rate, slot, credits, then its closing) costs Redis about 150,000
// instructions in all (125,000 of them in EVALSHA) when its account's calls go out in
// runs of 10, and 385,000 in runs of one step; before the steps passed their
// parameters as one string and the replay check rode on the marker's write, 194,000
// and 391,000. When the runs replaced scripts of one step each, Redis's whole CPU per
// paid call with calls spread over 1,000 accounts, where runs hold one step, did not
// change measurably (63 to 67 µs against 67 to 69 µs,
// BenchmarkAdmitClose/step=full/accounts=1000/parallel). Redis Functions
// (FUNCTION LOAD, FCALL), whose helpers are created once, saved about 2% on the
// scripts of one step: not worth loading them on every node and again after every
// restart or failover.
//
// # A reservation's life
//
// A reservation is open from its admission until its closing settles it, or until its
// deadline (the caller's Reservation.Expires, held for Expires-Now from the store's
// clock, see "Clocks") passes and it is voided:
//
//	admission: marker "o ...", deadline in :open --+-- closing: marker "d", out of
//	           (nx lowered if it is the earliest)  |   :open; charge kept or refunded
//	                                               |
//	                                               +-- deadline <= now: marker "v",
//	                                                   out of :open; the credits and
//	                                                   the counts given back
//
// Voiding runs in the account's scripts, atomically with its admissions and closings,
// so a reservation is voided once and never after it was settled, and a closing that
// finds "v" answers driver.ErrVoided and changes nothing. The admission script, and
// the Reserve, Adjust and Balance scripts, void first when the balance's nx says a
// deadline has passed (a field the admission reads anyway, so this costs nothing while
// none has); a closing does too on the caller's clock, and on the server's clock leaves
// it to them, so that a closing reads no clock.
//
// [Store.Sweep] finds the accounts that nobody touches through the index of expiring
// accounts, 16 sorted sets (shards), each with a hash tag of its own chosen so that
// the shards spread evenly over a Cluster's slots, outside every account's slot, and
// each read and written with scripts of its own slot; an account's entries live in the
// shard a hash of its id picks, so that no key is written by every account. A sweep
// reads, in one pipeline, whether each shard has an entry whose score (at most its
// account's earliest deadline) has passed: with nothing due, that is the whole sweep,
// one round trip (one per node on a Cluster), however many accounts are active. A shard
// with due entries is claimed with a lease (a key in the shard's slot holding the
// sweeping Store's token for 10 seconds, renewed with every page): the sweeps of other
// instances leave it alone meanwhile and take other shards, so that instances divide
// the work instead of repeating it. A sweep that stops at its limit keeps the lease, so
// that its next sweep goes on with the shard; one that empties the shard gives it up.
// For each page of entries, it voids the accounts' due reservations with one script of
// each account's, sent together in one pipeline, then replaces the entries in one
// script of the shard: each with one at the account's next deadline, or none when the
// account has no open reservation left (the usual case: its calls were settled). The
// reservations a page may void are shared out among its accounts so that a sweep never
// voids more than its limit. A sweep of 1,000 accounts whose reservations were all
// settled takes 65 round trips (the earlier single index took 2,004: two per account),
// and the next sweep, with nothing due, one (TestSweepRoundTrips). Entries of the single
// index of earlier versions are still read, voided and moved to their shards, so that an
// upgrade loses no reservation. So every open reservation must be found by an entry no
// later than its deadline, whatever instance dies between which two commands. An entry
// is written before the reservation it covers, never after:
//
//   - The balance keeps the account's epoch (ie) and a bound (ix): an entry of the
//     account under that epoch is in the index (its shard, or the earlier index for
//     an entry written before an upgrade) at a score no later than ix. An
//     admission or a reservation whose deadline is no earlier than nx or ix is covered
//     by the entry already there, and opens at once: the common case, which costs the
//     fields the admission reads anyway.
//   - Any other (the account's first reservation after all of its were settled and
//     swept, or one due earlier than all the others) is refused by its script, changing
//     nothing; the caller writes the entry "<account>\x00<epoch>" in the account's
//     shard at the deadline (ZADD LT, which only lowers a score), and sends the step
//     again with that claim, which the script accepts while the epoch is still the
//     account's, and lowers ix to it.
//     Two more round trips, once in a while for an account (after a sweep found none of
//     its reservations open).
//   - A sweep removes only the entry it read. If that entry is of the account's epoch,
//     the sweep's void script first moves the account to the next epoch (a claim to the
//     old one is then refused, and made again), and sets ix to the earliest deadline
//     left; its next script removes the entry and writes the one of the account's epoch
//     at that deadline (or lower, if it is already). An instance killed between the two
//     leaves the old entry in place, found again by the next sweep.
//
// A sweep goes on past the entries of accounts whose reservations were all settled,
// removing them, so that it voids fewer than its limit only when it found no more to
// void outside the shards other instances hold; it looks at an account at most twice, so that entries it cannot move past now
// (the account's clock behind the index's, on a Cluster) do not keep it busy.
//
// # Pipelines
//
// Admissions and closings are the hot path, two scripts per paid call (a script and a
// ZREM with only the limits in Redis). Under load they are pipelined, like a
// database's group commit: a call that finds no pipeline in flight on its lane goes
// out at once, with the calls of its lane that the goroutines ready to run make as it
// lets them go first; calls that arrive while one is in flight go out together, up to
// Options.Batch ([DefaultBatch]), when it returns. A call's lane (one of four) is
// chosen by its first key, so the calls of one account share a lane, and its
// admissions and its closings (whose first keys differ) most often have a lane each.
// In a pipeline, the calls of one account and one script are merged into one run of
// the script, the steps in the order the calls arrived; runs of different accounts
// or scripts follow each other in the pipeline in the order of their first call.
// That order may differ from the calls' arrival (a closing can take effect after an
// admission that arrived later), which is sound: the calls of a pipeline were all in
// flight at once, so any order is one they could have taken. Each call still gets its
// own answer, exactly what it would have got alone in that order, and still costs one
// round trip; a busy instance just makes far fewer of them, with fewer system calls
// and wake-ups on both sides, and a hot account's calls share its reads and writes.
// Redis stops a script at the first command that fails and keeps what it wrote, so
// the scripts check beforehand what a command could refuse (a count past 2^63-1) or
// catch it; a run that fails all the same (no connection, a timeout) fails every call
// in it, in doubt, as a lone call's failure would.
//
// On this project's 2-core test machine, with wrk and 64 connections on one account's
// key, REST calls with every store in Redis reach 0.40 to 0.45 of the throughput of
// the memory stores (medians of sets of 4 to 6 rounds, `go run ./internal/cmd/restbench
// -client wrk -compare memory,redis`; 0.43 with restbench's own load generator),
// against 0.32 to 0.36 for the previous version (one script run per call, lanes taken
// in turn) in alternating sets in the same hour. Redis sharing the 2 cores then spends
// about 27 to 40 µs of CPU per paid call, and the Go process 60 to 100 µs, against
// 50 to 64 µs for a call on the memory stores; restbench prints these per call. A
// script that Redis lost (a restart, SCRIPT FLUSH) meets NOSCRIPT in the pipeline and
// is sent again with EVAL on its own, which is safe since it did not run.
//
// The rate limit reproduces [driver.GCRA] exactly. Lua has only doubles, exact below
// 2^53, so times travel as (Unix seconds, nanoseconds) and the arithmetic runs on the
// distance between the stored timestamp and now; windows (Burst emission intervals)
// are limited to 2^52 ns, about 52 days. Lease ends and credit periods are Unix
// microseconds. Balances change with HINCRBY (64-bit integers) and are read back as
// strings; an admission run carries the remaining and used credits as pairs of Lua
// numbers (v = hi*10^9 + lo), so they are exact over the whole 64-bit range, and
// refuses a debit that would take the used count past 2^63-1 (HINCRBY would fail
// after the run had written its markers).
//
// # Clocks
//
// By default the rate limit, the leases and the reservations' deadlines run on the
// Redis server's clock (TIME in the script), so instances whose clocks disagree still
// share one bucket, one set of leases and one judge of expiry: a lease of 30s ends 30s
// after Redis granted it, and a reservation held for a minute is voided a minute after
// Redis took it, whatever the instances' clocks say. Options.CallerClock makes them use the time the caller passes instead;
// the conformance suites need it, since they script time (instants in 2030). Every
// instance sharing a prefix must use the same clock. Credit periods always come from
// the caller (the Meter's clock decides the month).
//
// # Durability
//
// Redis acknowledges a write when it is in memory, not on disk. With the default
// configuration (appendonly no) a crash loses everything written since the last
// snapshot; with appendonly yes and appendfsync everysec, the usual setting, up to
// about a second of writes. Only appendfsync always writes each command to disk before
// Redis replies (in the measurements of the research notes, about 5 times slower on one
// connection, 1.2 to 1.9 times under concurrency). Replication is asynchronous too: a
// failover to a replica loses the writes it had not received. WAIT and WAITAOF (Redis
// 7.2 and later) make a client wait for replicas or disks; this Store does not send
// them, since each would be another round trip per call.
//
// What a lost write means here: a debit lost is a free call; a lost marker lets a
// retried request be charged again; a lost revocation or rotation brings a key back to
// life; a lost timestamp or lease loosens a limit for a moment. Redis is therefore not a
// ledger of record in this package: there is no outbox of ledger entries and no
// reconciliation against PostgreSQL. The safe configurations are:
//
//   - keys and money in PostgreSQL (store/postgres) and only the limits in Redis, the
//     first composition above. Losing Redis then loosens the limits briefly and
//     nothing else;
//   - everything in Redis, on a primary with appendonly yes and appendfsync always,
//     and no failover to an asynchronous replica (or accepting that a failover loses
//     its last writes).
//
// A reply lost after Redis ran the admission script (a timeout, a broken connection)
// leaves the step taken: the credits stay reserved until the reservation's deadline and
// the slot held until its lease ends, and then both come back. A retry of Admit with the
// same request id takes nothing more, and Close with a full refund undoes the step at
// once. A settlement that never reaches Redis leaves the reservation open until its
// deadline; it is then voided, and the call is not charged.
//
// # Memory
//
// Besides the records, Redis holds one marker of about 200 bytes (measured with the
// default prefix) per request remembered for replays, for Options.Retention
// ([DefaultRetention], 10 minutes): at 1,000 calls a second, about 600,000 markers,
// 120 MB. Open reservations last only as long as their calls. Rate timestamps and lease
// sets expire a second after they stop mattering.
//
// # Connection pool and timeouts
//
// The host builds and owns the client. Configure it to fail fast, so that a Redis that
// is down or stuck makes the call fail within a fraction of a second (the service then
// answers 503, admits nothing and charges nothing) instead of holding the caller for
// the client's defaults (a 5s dial timeout, tried 5 times, and 5s reads):
//
//	client := goredis.NewClient(&goredis.Options{
//		Addr:                  "redis:6379",
//		PoolSize:              64,                     // at least the calls in flight on one instance
//		MinIdleConns:          64,                     // the whole pool, kept open: no call dials
//		PoolTimeout:           500 * time.Millisecond, // wait for a busy pool, then fail
//		DialTimeout:           250 * time.Millisecond, // a down Redis fails the call quickly
//		DialerRetries:         1,                      // one dial per attempt (default 5, 100ms apart)
//		ReadTimeout:           250 * time.Millisecond, // a script runs in tens of µs; later means stuck
//		WriteTimeout:          250 * time.Millisecond,
//		ContextTimeoutEnabled: true,                   // a request's deadline ends the wait
//		MaxRetries:            1,                      // one retry on a broken connection (default 3)
//		Protocol:              2,                      // RESP2: about 10% less CPU per call than RESP3
//	})
//
// The scripts answer the same under RESP2 and RESP3 (the tests run both). go-redis
// speaks RESP3 by default, which costs a HELLO per connection and, on every reply, a
// check for pushed notifications the Store never asks for; with RESP2, REST calls on
// Redis took about 10% less CPU in total (the service and Redis together), measured with
// `go run ./internal/cmd/restbench -compare redis,redis` under /usr/bin/time.
//
// Connections recover by themselves: go-redis drops a broken connection and dials a new
// one on demand, so when Redis comes back the next call succeeds without a restart.
// ContextTimeoutEnabled makes a context's deadline end a wait at once; a cancellation
// without a deadline is noticed when the read times out, because go-redis does not
// abort a read in flight, which is one more reason for a short ReadTimeout. A retried
// command may have run once already: the admission, the settlement and the ledger's
// writes are idempotent by request id, the slot operations by holder; a retried Allow
// may count one event twice (stricter, never looser). For a Redis Cluster, start from
// [ClusterOptions] (see "Redis Cluster").
//
// # Redis Cluster
//
// Build the client from [ClusterOptions], which sets the fail-fast options above and
// one more, ClusterStateReloadInterval ([ClusterStateReloadInterval], 2s):
//
//	client := goredis.NewClusterClient(redis.ClusterOptions("redis-0:6379", "redis-1:6379", "redis-2:6379"))
//	rs, err := redis.New(client, nil)
//
// Every key of an account shares its hash tag, so each script runs on the master of
// the account's slot, and the global indexes are read and written one key at a time:
// no command is refused with CROSSSLOT, and the accounts spread over the masters.
//
// Failover. When a master dies, the cluster promotes its replica once the other
// masters agree that it is gone: cluster-node-timeout (15s by default), then an
// election of about a second. go-redis reloads the cluster's topology at once after a
// MOVED or ASK redirection, but a dead master sends none: until the client reloads it
// on its own, it sends that master's slots to the dead address, and those calls fail
// (503, nothing charged). With go-redis's default reload interval, a minute, they kept
// failing 30 to 55s after the takeover (55s in this test); with 2s, they are served
// again within about 2 to 3s of it. TestClusterFailover kills (kill -9) a master of a cluster of 3 masters and 3
// replicas on one machine (cluster-node-timeout 2s) while paid calls run on 24 accounts
// spread over the masters: over 20 runs under the race detector on 2 busy cores, the
// replica was promoted 3.0 to 4.4s after the kill, the failed master's accounts were
// all served again 0.1 to 3.1s after the promotion, and the other masters' accounts
// settled 195 to 7,879 calls during the outage without one failed attempt. Configure
// the servers with cluster-require-full-coverage no: with the default, yes, every node
// refuses every command from the moment the master is marked failed until its replica
// takes over, so all accounts fail, not only the failed master's.
//
// What a failover loses: replication is asynchronous (see "Durability"), so the writes
// that the dead master acknowledged last and its replica had not received yet are
// gone. The calls they belong to go free, never charged twice: a lost admission makes
// its closing answer store.ErrNotFound (the call is not charged), a lost settlement
// leaves the reservation open until its deadline, when it is voided. The test finds
// every such loss and checks that it is one of the last writes before the kill; it saw
// one lost admission in about 20 runs. Keep money in PostgreSQL (the first
// composition above) where that is not acceptable.
//
// Resharding. While a slot moves to another master (CLUSTER SETSLOT IMPORTING and
// MIGRATING, MIGRATE of its keys, SETSLOT NODE), its keys are split between the two
// nodes, and Redis refuses a command of several keys that it cannot run on one of them
// (TRYAGAIN) or redirects it (ASK, then MOVED once the slot has moved). An admission
// always writes a key that does not exist yet (the request's marker), so an account's
// admissions are refused with TRYAGAIN for as long as its slot is moving. go-redis
// follows ASK and MOVED and sends a TRYAGAIN again a few times (MaxRedirects, 3); the
// Store sends a script refused so again, with pauses growing from 1 to 50ms, for
// about 5s in all. Redis refuses these before running anything, so sending again
// cannot take a step twice, and the scripts are idempotent by request id besides
// (go-redis's cluster pipeline re-sends a node's whole batch when its first command is
// refused, commands that did run included). TestClusterResharding moves a hot
// account's slot (about 2,000 keys, 10 a MIGRATE as redis-cli does) while 8
// goroutines call it: over 20 runs, the move took 0.08 to 0.9s, the nodes refused 3
// to 250 commands in that time (most of them MOVED, followed at once), every call
// succeeded, and the balance was exact; without the Store's retry, 8 to 10 calls of
// each run failed with TRYAGAIN or MOVED. A call of the moving account waits for the
// move, so move slots one at a time.
//
// # Tests
//
// The Store needs Redis 7.0 or later (the scripts use PEXPIRE's GT option).
//
// The tests need a Redis: set TOLLGATE_TEST_REDIS to its address. Each test works under
// a random prefix and deletes its keys at the end (SCAN by prefix); nothing else on the
// server is touched. Without the variable the tests skip, or fail when CI=true.
// TestCluster, TestClusterFailover and TestClusterResharding also start private
// Redis Clusters of 3 masters and 3 replicas (redis-server from PATH, on ports of their
// own) and kill them at the end.
//
//	TOLLGATE_TEST_REDIS=127.0.0.1:6379 go test -race ./store/redis/
//	TOLLGATE_TEST_REDIS=127.0.0.1:6379 go test -run='^$' -bench=. -benchtime=3s ./store/redis/
package redis
