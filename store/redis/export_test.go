package redis

import goredis "github.com/redis/go-redis/v9"

// Scripts lists every script of the package by name, so that the tests can check that
// each one ran, and on which keys.
var Scripts = map[string]*goredis.Script{
	"admit": admitScript, "close": closeScript, "rate": rateScript, "acquire": acquireScript,
	"renew": renewScript, "inUse": inUseScript, "open": openScript, "reserve": reserveScript,
	"adjust": adjustScript, "balance": balanceScript, "usage": usageScript,
	"createAccount": createAccountScript, "createKey": createKeyScript, "listKeys": listKeysScript,
	"resolve": resolveScript, "rotate": rotateScript, "revoke": revokeScript,
	"checkKey": checkKeyScript, "delIf": delIfScript,
}

// Queued returns the number of calls waiting for a pipeline in flight.
func (s *Store) Queued() int {
	if s.batches == nil {
		return 0
	}
	return s.batches.Queued()
}
