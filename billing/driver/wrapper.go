package driver

// A Wrapper is a store that decorates another one (to count, time or trace its calls,
// say) and forwards to it. Unwrap returns the store it decorates, which may be a
// Wrapper too.
//
// A Wrapper decorates a whole store, as one value: it implements every interface of
// this package the store implements ([Admitter], [Sweeper] and [KeyChecker] included)
// by forwarding, and is passed in every role the store plays (each field of
// tollgate.Stores the store fills, the key store included). The service's meter
// (the Meter) groups the parts of an admission by the value that holds them, so that
// the one value admits in one step, as the store it wraps does. Embedding the store's
// type is the short way to forward every method.
//
// Unwrap is what lets the Meter notice a decoration that costs round trips: when the
// parts held by one [Admitter] reach it through distinct values (a wrapper per role),
// or through a wrapper that is no Admitter, the Meter performs them in several steps,
// one round trip each, and logs a warning once, when it is made.
type Wrapper interface {
	// Unwrap returns the store this one decorates.
	Unwrap() any
}
