// Package meter admits and settles calls against an account's plan ([billing.Plan]):
// its monthly credits, its rate limit and its concurrency ceiling. It is the policy of
// the call core, internal to it: package tollgate makes the one [Meter] of a Service
// from its stores and options. A call is one rate-limit event, or several for a batch
// of calls ([Admission.Events]), allowed or refused together. A [Meter] admits each
// call (checks the rate limit, takes a concurrency slot, reserves the credits) and
// settles it when it ends (keeps the charge, or refunds what failed on the service's
// side, and frees the slot).
//
// The Meter is the policy. The stores it runs on keep the state, in one process
// (store/memory) or shared by many (store/postgres, store/redis). Their contract, the
// interfaces a store implements ([driver.Ledger], [driver.RateLimiter],
// [driver.ConcurrencyLimiter], and the optional [driver.Admitter] and [driver.Sweeper])
// and the values they exchange, is package [driver] (billing/driver), checked by
// store/storetest. A key store that can check a cached key in the same step as an
// admission implements [driver.KeyChecker]. The plans, the values and the errors that
// the users of the service see are package [billing].
//
// # A reservation's life
//
// The credits of a call are a pending transfer with a deadline, as in RFC 4006's
// credit control (granted units have a validity time) or TigerBeetle's pending
// transfers with a timeout. Admission reserves them until the reservation's expiry: the
// admission's time, plus the call's timeout, plus a grace (the Service's
// Options.ReservationGrace, the Meter's [Options.Hold]; a batch, whose items run in
// rounds, holds its reservation for its longest run instead: [Admission.Hold]). A
// reservation ends exactly once:
//
//	admit: reserve --> open --+-- settle, before the expiry --> settled: the charge
//	                          |                                 kept, or refunded
//	                          |
//	                          +-- still open at the expiry ---> voided: the credits
//	                              (the instance died, the       come back and the
//	                              store was down)               calls are uncounted
//
// Whichever gets there first wins, and the other changes nothing: a settlement that
// arrives after the void gets [billing.ErrVoided]; a void never follows a settlement.
// Every ledger operation on an account voids its expired reservations first, and a
// [driver.Sweeper] voids those of accounts nobody touches, from any instance,
// concurrently with every other.
//
// So no credit lives only in a process's memory. A settlement the store cannot take
// (an outage) is retried by one worker from a bounded queue while the reservation
// lasts, and otherwise left to the expiry, which refunds it; an admission whose answer
// was lost is left to the expiry too. The consequence for operators: a call that
// succeeded but whose charge could not be written before its reservation expired is
// not charged. An outage or a crash errs in the customer's favour, never against them.
package meter
