package redis

import (
	"context"
	"slices"

	"github.com/tollgate-dev/tollgate/billing/driver"

	goredis "github.com/redis/go-redis/v9"
)

// Scripts lists every script of the package by name, so that the tests can check that
// each one ran, and on which keys.
var Scripts = map[string]*goredis.Script{
	"admit": admitScript, "close": closeScript, "rate": rateScript, "acquire": acquireScript,
	"renew": renewScript, "inUse": inUseScript, "open": openScript, "reserve": reserveScript, "roll": rollScript,
	"adjust": adjustScript, "balance": balanceScript, "usage": usageScript,
	"createAccount": createAccountScript, "createKey": createKeyScript, "listKeys": listKeysScript,
	"resolve": resolveScript, "rotate": rotateScript, "revoke": revokeScript,
	"checkKey": checkKeyScript, "delIf": delIfScript, "void": voidScript, "due": dueScript,
	"reindex": reindexScript, "sweepClaim": sweepClaimScript, "update": updateScript, "updateAccount": updateAccountScript, "deleteAccount": deleteAccountScript, "idemClaim": idemClaimScript, "idemClose": idemCloseScript,
	"krevInit": krevInitScript, "pruneKeys": pruneKeysScript,
	"whCreate": whCreateScript, "whUpdate": whUpdateScript, "whDelete": whDeleteScript,
	"whEndpoints": whEndpointsScript, "whEnqueue": whEnqueueScript, "whClaim": whClaimScript,
	"whRecord": whRecordScript, "whResend": whResendScript, "whList": whListScript,
	"whPrune": whPruneScript, "whSweepClaim": whSweepClaimScript, "whSweepRecord": whSweepRecordScript,
	"journalPeek": journalPeekScript, "journalClaim": journalClaimScript, "journalRemove": journalRemoveScript,
}

// LuaFiles returns the files of lua/, each with its text as written (includes not
// expanded).
func LuaFiles() map[string]string {
	entries, _ := luaFiles.ReadDir("lua")
	files := make(map[string]string, len(entries))
	for _, e := range entries {
		b, _ := luaFiles.ReadFile("lua/" + e.Name())
		files[e.Name()] = string(b)
	}
	return files
}

// LuaSource returns the text of a file of lua/ with its includes expanded: the script
// sent to Redis.
func LuaSource(name string) string { return luaSource(name, nil) }

// Queued returns the number of calls waiting for a pipeline in flight.
func (s *Store) Queued() int {
	if s.batches == nil {
		return 0
	}
	return s.batches.Queued()
}

// Lanes returns the lanes of an account's admissions and closings.
func (s *Store) Lanes(account string) (admit, close int) {
	a := s.account(account)
	return laneOf(a.record()), laneOf(a.leases())
}

// Together performs admission steps (driver.Step) and closings (driver.Closing) as
// the calls of one batch: their scripts' steps merged into runs, one pipeline. It
// returns, for each, its result (driver.StepResult or driver.Balance) and error, and
// the order in which they took effect. A step refused until its account is indexed
// takes effect after the batch, when it is sent again, as Admit sends it.
func (s *Store) Together(ctx context.Context, ops []any) ([]any, []error, []int) {
	results, errs := make([]any, len(ops)), make([]error, len(ops))
	var order []int
	var calls []scriptCall
	var of []int // the op of each call
	for i, op := range ops {
		var c scriptCall
		switch op := op.(type) {
		case driver.Step:
			c, results[i], errs[i] = s.admitCall(op, "")
		case driver.Closing:
			results[i] = driver.Balance{}
			c, errs[i] = s.closeCall(op)
		}
		if c.args != nil && errs[i] == nil {
			calls, of = append(calls, c), append(of, i)
		} else {
			order = append(order, i) // decided without Redis
		}
	}
	if len(calls) == 0 {
		return results, errs, order
	}
	for _, r := range runs(calls) {
		for _, j := range r.of {
			order = append(order, of[j])
		}
	}
	replies, _ := s.pipeline(ctx, "", calls)
	var again []int // the calls of steps refused until their account is indexed
	for j, i := range of {
		switch op := ops[i].(type) {
		case driver.Step:
			var need *indexNeed
			results[i], need, errs[i] = admission(ctx, op, replies[j].val, replies[j].err)
			if need != nil {
				again = append(again, j)
			}
		case driver.Closing:
			results[i], errs[i] = closing(ctx, op, replies[j].val, replies[j].err)
		}
	}
	for _, j := range again {
		i := of[j]
		results[i], errs[i] = s.admitted(ctx, ops[i].(driver.Step), replies[j].val, replies[j].err)
		order = append(slices.DeleteFunc(order, func(k int) bool { return k == i }), i)
	}
	return results, errs, order
}

// IndexKeys returns the names of the shards of the index of expiring accounts, and
// then the index of earlier versions.
func (s *Store) IndexKeys() []string {
	keys := make([]string, 0, sweepShards+1)
	for i := range sweepShards {
		keys = append(keys, s.expiring(i))
	}
	return append(keys, s.legacyExpiring())
}

// IndexKeyOf returns the name of the shard of the index that holds an account's entries.
func (s *Store) IndexKeyOf(account string) string { return s.expiring(s.shardOf(account)) }

// LegacyIndexKey returns the name of the index of expiring accounts of earlier versions.
func (s *Store) LegacyIndexKey() string { return s.legacyExpiring() }

// CRC16 is the CRC-16/XMODEM of Redis Cluster's key slots, by which the Store spreads
// the shards of the index of expiring accounts.
var CRC16 = crc16

// SetAccountScan sets the most accounts a page of Accounts examines, so that the tests
// make the store return short pages.
func (s *Store) SetAccountScan(n int) { s.scan = n }

// SetJournalScan sets the most entries of a shard of the index of journals that a
// claim reads at once (0 restores the default).
func (s *Store) SetJournalScan(n int) { s.jscan = n }

// JournalShards returns the names of the shards of the index of journals.
func (s *Store) JournalShards() []string {
	names := make([]string, sweepShards)
	for i := range names {
		names[i] = s.journals(i)
	}
	return names
}

// AccountRecordKey returns the name of the key of an account's record under prefix.
func AccountRecordKey(prefix, id string) string {
	return (&Store{prefix: prefix}).account(id).record()
}

// ScriptName is the name Hook gives the script that cmd runs, for its tests.
func ScriptName(cmd goredis.Cmder) string { return script(cmd) }

// ScriptSource returns the text of the script of a file of lua/, its includes expanded.
func ScriptSource(file string) string { return luaSource(file, nil) }

// ShardOf returns the shard of the indexes of an account (the index of expiring
// accounts, the index of journals).
func ShardOf(s *Store, account string) int { return s.shardOf(account) }

// AccountKeys returns the names of the keys of an account's balance, usage and open
// reservations under prefix.
func AccountKeys(prefix, id string) (balance, usage, open string) {
	a := (&Store{prefix: prefix}).account(id)
	return a.balance(), a.usage(), a.open()
}

// FenceKeyOf returns the fence key that follows a write of key with Options.Replicas.
func (s *Store) FenceKeyOf(key string) string { return s.repl.fenceKey(key) }
