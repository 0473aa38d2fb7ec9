package auth

import "time"

// KeyCacheOptions configures the key cache of a service (tollgate.Options.KeyCache),
// which keeps key records in memory between calls. The zero value is the default.
type KeyCacheOptions struct {
	// TTL is how long a record is kept. Restrictions and plans are read from the store
	// again after it. The default is 5 minutes.
	TTL time.Duration
	// MaxEntries bounds the number of records; when it is reached, an eighth of them
	// is dropped. The default is 100,000.
	MaxEntries int
}
