package redis

import (
	"embed"
	"strings"

	goredis "github.com/redis/go-redis/v9"
)

// The Lua scripts, one file each in lua/, embedded in the binary; each file begins with
// what the script does, its KEYS, its ARGV and its reply. Every script declares in KEYS
// every key it touches, and the keys of one script share one hash tag (the
// account's), so that each script runs on one Redis Cluster slot. The global index
// keys (key id and key hash to account, and the index of expiring accounts) are only
// ever used by commands and scripts of one key.
//
// A file may include another: a line "--#include <file>" stands for that file's text,
// its own includes expanded (see luaSource). The helpers (lib_*.lua) are groups of
// local functions that a script includes before its own text; the blocks (void_block,
// void_due, flush_credits) are code that the hot path's scripts include where it runs,
// so that they pay for it only when it does. Redis keeps the scripts' globals
// read-only, so every helper is local.
//
// Numbers: Lua in Redis has only doubles, exact for integers below 2^53. Times therefore
// travel as a pair (Unix seconds, nanoseconds) and the rate-limit arithmetic works on
// the difference between the stored timestamp and now, which is small; lease scores
// and credit periods are Unix microseconds (about 1.9e15 in 2030, below 2^53). Balances
// are changed with HINCRBY (exact 64-bit integers in Redis) from decimal strings made
// by Go, and read back as strings, never through a Lua number; the grant lots
// (lua/lib_grants.lua), bounded by driver.MaxCredits, are worked on as Lua numbers,
// exact below 2^53, off the hot path. What the scripts cost
// Redis, and why the hot path's are written as they are, is measured in bench_test.go.
//
//go:embed lua/*.lua
var luaFiles embed.FS

// The scripts. Each is sent as EVALSHA, and as EVAL when Redis does not have it yet.
var (
	admitScript         = luaScript("admit.lua")
	closeScript         = luaScript("close.lua")
	rateScript          = luaScript("rate.lua")
	acquireScript       = luaScript("acquire.lua")
	renewScript         = luaScript("renew.lua")
	inUseScript         = luaScript("in_use.lua")
	openScript          = luaScript("open.lua")
	reserveScript       = luaScript("reserve.lua")
	rollScript          = luaScript("roll.lua")
	adjustScript        = luaScript("adjust.lua")
	balanceScript       = luaScript("balance.lua")
	voidScript          = luaScript("void.lua")
	dueScript           = luaScript("due.lua")
	sweepClaimScript    = luaScript("sweep_claim.lua")
	reindexScript       = luaScript("reindex.lua")
	usageScript         = luaScript("usage.lua")
	createAccountScript = luaScript("create_account.lua")
	createKeyScript     = luaScript("create_key.lua")
	listKeysScript      = luaScript("list_keys.lua")
	krevInitScript      = luaScript("krev_init.lua")
	pruneKeysScript     = luaScript("prune_keys.lua")
	resolveScript       = luaScript("resolve.lua")
	rotateScript        = luaScript("rotate.lua")
	revokeScript        = luaScript("revoke.lua")
	checkKeyScript      = luaScript("check_key.lua")
	updateScript        = luaScript("update.lua")
	updateAccountScript = luaScript("update_account.lua")
	deleteAccountScript = luaScript("delete_account.lua")
	delIfScript         = luaScript("del_if.lua")
	idemClaimScript     = luaScript("idem_claim.lua")
	idemCloseScript     = luaScript("idem_close.lua")

	// The journal's (see journal.go and lua/lib_journal.lua).
	journalPeekScript   = luaScript("journal_peek.lua")
	journalClaimScript  = luaScript("journal_claim.lua")
	journalRemoveScript = luaScript("journal_remove.lua")

	// The webhook outbox's (see WebhookStore and lua/lib_wh.lua).
	whCreateScript      = luaScript("wh_create.lua")
	whUpdateScript      = luaScript("wh_update.lua")
	whDeleteScript      = luaScript("wh_delete.lua")
	whEndpointsScript   = luaScript("wh_endpoints.lua")
	whEnqueueScript     = luaScript("wh_enqueue.lua")
	whClaimScript       = luaScript("wh_claim.lua")
	whRecordScript      = luaScript("wh_record.lua")
	whResendScript      = luaScript("wh_resend.lua")
	whListScript        = luaScript("wh_list.lua")
	whPruneScript       = luaScript("wh_prune.lua")
	whSweepClaimScript  = luaScript("wh_sweep_claim.lua")
	whSweepRecordScript = luaScript("wh_sweep_record.lua")
)

// scriptNames names each script (its file's name, without .lua) by its SHA-1, for the
// phases of round trips that run it (see Hook). It is filled as the scripts are made,
// and only read afterwards.
var scriptNames = map[string]string{}

// luaScript returns the script of a file of lua/, its includes expanded.
func luaScript(name string) *goredis.Script {
	sc := goredis.NewScript(luaSource(name, nil))
	scriptNames[sc.Hash()] = strings.TrimSuffix(name, ".lua")
	return sc
}

// luaSource returns the text of a file of lua/ with each line "--#include <file>"
// (after any indentation) replaced by that file's text, itself expanded. outer lists
// the files being expanded, to refuse a cycle. The files are part of the binary, so a
// missing one or a cycle is a mistake of this package, found by any test: it panics.
func luaSource(name string, outer []string) string {
	for _, o := range outer {
		if o == name {
			panic("redis: lua/" + name + " includes itself through " + strings.Join(outer, ", "))
		}
	}
	b, err := luaFiles.ReadFile("lua/" + name)
	if err != nil {
		panic("redis: " + err.Error())
	}
	var out strings.Builder
	for line := range strings.Lines(string(b)) {
		if file, ok := strings.CutPrefix(strings.TrimSpace(line), "--#include "); ok {
			out.WriteString(luaSource(file, append(outer, name)))
			continue
		}
		out.WriteString(line)
	}
	return out.String()
}

// The status codes scripts answer with.
const (
	stOK           = 0
	stNotFound     = 1 // no balance, no account, no key
	stConflict     = 2 // taken, revoked, refund too large
	stInsufficient = 3 // balance short
	stUnknown      = 4 // unknown reservation
	stOverflow     = 5 // a refund would take the remaining credits past 2^63-1
	stVoided       = 6 // the reservation was voided at its expiry
	stTooMany      = 7 // the remaining plus used credits would pass driver.MaxCredits
	stIndex        = 8 // refused until the account is indexed (see Store.indexFirst)
	stTooManyLots  = 9 // a grant would start one lot too many (driver.MaxGrantLots)
	// stJournal (10) is in journal.go, stSeen (11) in roll.go.
)
