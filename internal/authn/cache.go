package authn

import (
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/auth"
)

// A KeyCache keeps key records (with their accounts) in memory, so that a service on a
// network key store does not read the store to authenticate every call. A cached record
// may be stale: it is marked so ([auth.Principal.Cached]) and the caller must check the
// key's liveness before serving the call. Tollgate's Service does it in the admission
// step of paid calls, in the same round trip, so a rotated or revoked key is still
// refused on the very next call on every instance; a record is dropped at once when its
// key is rotated, revoked or changed on this instance (the Service hears it on its
// events and calls [Authority.Forget]), and after its TTL ([auth.KeyCacheOptions]) in
// any case.
//
// A KeyCache is safe for concurrent use.
type KeyCache struct {
	ttl time.Duration
	max int

	mu       sync.RWMutex
	byHash   map[auth.Hash]cachedKey
	byID     map[string]auth.Hash
	accounts map[string]cachedAccount // for session tokens
}

type cachedAccount struct {
	account auth.Account
	expires time.Time
}

type cachedKey struct {
	key     auth.Key
	account auth.Account
	expires time.Time
}

// NewKeyCache returns an empty cache configured by opts, which may be nil.
func NewKeyCache(opts *auth.KeyCacheOptions) *KeyCache {
	c := &KeyCache{ttl: 5 * time.Minute, max: 100_000,
		byHash: map[auth.Hash]cachedKey{}, byID: map[string]auth.Hash{}, accounts: map[string]cachedAccount{}}
	if opts != nil {
		if opts.TTL > 0 {
			c.ttl = opts.TTL
		}
		if opts.MaxEntries > 0 {
			c.max = opts.MaxEntries
		}
	}
	return c
}

// get returns the record of hash h if it is fresh at now.
func (c *KeyCache) get(h auth.Hash, now time.Time) (auth.Key, auth.Account, bool) {
	c.mu.RLock()
	e, ok := c.byHash[h]
	c.mu.RUnlock()
	if !ok || !now.Before(e.expires) {
		return auth.Key{}, auth.Account{}, false
	}
	return e.key, e.account, true
}

// getByID returns the record of the key with the given id if it is fresh at now.
func (c *KeyCache) getByID(id string, now time.Time) (auth.Key, auth.Account, bool) {
	c.mu.RLock()
	h, ok := c.byID[id]
	c.mu.RUnlock()
	if !ok {
		return auth.Key{}, auth.Account{}, false
	}
	return c.get(h, now)
}

// put keeps the record of a live key.
func (c *KeyCache) put(k auth.Key, a auth.Account, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.byHash) >= c.max {
		drop := c.max/8 + 1
		for h, e := range c.byHash {
			delete(c.byHash, h)
			delete(c.byID, e.key.ID)
			if drop--; drop == 0 {
				break
			}
		}
	}
	if old, ok := c.byID[k.ID]; ok {
		delete(c.byHash, old)
	}
	c.byHash[k.Hash] = cachedKey{key: k, account: a, expires: now.Add(c.ttl)}
	c.byID[k.ID] = k.Hash
}

// forget drops the record of the key with the given id.
func (c *KeyCache) forget(keyID string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h, ok := c.byID[keyID]; ok {
		delete(c.byHash, h)
		delete(c.byID, keyID)
	}
}

// forgetAccountKeys drops the records of every key of the account with the given id,
// and the account's own record. It walks the whole cache: accounts change rarely.
func (c *KeyCache) forgetAccountKeys(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for h, e := range c.byHash {
		if e.account.ID == id {
			delete(c.byHash, h)
			delete(c.byID, e.key.ID)
		}
	}
	delete(c.accounts, id)
}

// account returns the record of an account, for session tokens, if it is fresh at now.
func (c *KeyCache) account(id string, now time.Time) (auth.Account, bool) {
	c.mu.RLock()
	e, ok := c.accounts[id]
	c.mu.RUnlock()
	return e.account, ok && now.Before(e.expires)
}

// putAccount keeps the record of an account.
func (c *KeyCache) putAccount(a auth.Account, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.accounts) >= c.max {
		clear(c.accounts)
	}
	c.accounts[a.ID] = cachedAccount{account: a, expires: now.Add(c.ttl)}
}

// forgetAccount drops the record of an account.
func (c *KeyCache) forgetAccount(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.accounts, id)
}

// Len returns the number of key records.
func (c *KeyCache) Len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.byHash)
}
