package accounts

import (
	"context"
	"crypto/rand"
	"time"

	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/event"
	"github.com/tollgate-dev/tollgate/internal/every"
	"github.com/tollgate-dev/tollgate/journal"
)

// Changes and the journal: every change the Manager stores is prepared before the write
// that stores it (its ID, time and actor), given to that write (journal.With) for the
// store to record in its journal in the same atomic step, when the store keeps one
// (journal.KeyStore, journal.Ledger), and published once the write is stored; the
// Manager then removes it from the journal, unless an observer deferred it. What an
// instance stored and never published (it died in between, or an observer's store
// failed) is published by the relay of any instance (see package journal). Sessions
// are not journaled: they change no key store or ledger record.

// DefaultRelayInterval is the default [Options.RelayInterval].
const DefaultRelayInterval = 10 * time.Second

// removeBound bounds the removal of a published change from its journal; a removal that
// fails leaves the change to the relay, which publishes it again.
const removeBound = 2 * time.Second

// A change is the event of a change the Manager makes, prepared before the write that
// stores it and published after.
type change struct {
	event.Change
	// journal is the journal a write was given the change for, nil for none.
	journal journal.Store
}

// newChange returns c prepared to be stored and published: made at now, by the actor
// ctx names (unless c names its own), with a random ID (unless c has one).
func (m *Manager) newChange(ctx context.Context, now time.Time, c event.Change) *change {
	if c.Actor.ID == "" {
		c.Actor = actorOf(ctx)
	}
	if c.ID == "" {
		c.ID = rand.Text()
	}
	c.At = now
	return &change{Change: c}
}

// journaled returns ctx for the write that stores c: carrying c's journal entry
// ([journal.With]), for the store to record with the change, when the store that c's
// kind changes (the ledger for a credit adjustment, the key store for the others)
// keeps a journal and someone observes the kind (a change nobody observes needs none);
// ctx itself otherwise. Give it to that write only.
func (m *Manager) journaled(ctx context.Context, c *change) context.Context {
	var j journal.Store = m.keyJournal
	if c.Type == event.CreditsAdjusted {
		j = m.ledgerJournal
	}
	if j == nil || !m.events.Wants(c.Type) {
		return ctx
	}
	e, err := journal.Encode(&c.Change)
	if err != nil {
		// Bounded fields make this unlikely: the change is made and published as
		// without a journal.
		m.log.WarnContext(ctx, "tollgate: a change cannot be kept in the journal; it is made without its entry",
			"type", c.Type.String(), "account", c.Account, "id", c.ID, "error", err)
		return ctx
	}
	c.journal = j
	return journal.With(ctx, e)
}

// publish publishes c, which is stored; then, if its write recorded it in a journal
// and no observer deferred it, removes it from that journal.
func (m *Manager) publish(ctx context.Context, c *change) {
	if !m.events.Wants(c.Type) {
		return
	}
	m.events.Publish(ctx, &c.Change)
	if c.journal == nil || c.Deferred() {
		return
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeBound)
	defer cancel()
	if err := c.journal.Remove(rctx, c.ID); err != nil {
		m.log.DebugContext(ctx, "tollgate: a published change could not be removed from the journal; the relay publishes it again",
			"type", c.Type.String(), "id", c.ID, "error", err)
	}
}

// changed publishes c, a change made at now that no journal keeps (a session's).
func (m *Manager) changed(ctx context.Context, now time.Time, c event.Change) {
	if m.events.Wants(c.Type) {
		m.publish(ctx, m.newChange(ctx, now, c))
	}
}

// RelayJournal publishes again, once, the changes that the journals of the key store
// and the ledger kept longer than the relay's grace: those that an instance stored and
// did not publish (it died in between) or that an observer deferred (its store failed).
// It returns how many it published. The Manager runs it every [Options.RelayInterval];
// call it yourself when that is negative. Without a journal it does nothing.
func (m *Manager) RelayJournal(ctx context.Context) (int64, error) {
	if m.relay == nil {
		return 0, nil
	}
	return m.relay.Relay(ctx)
}

// RelayStats returns what the relay of the journals did since New; the zero value
// without a journal.
func (m *Manager) RelayStats() journal.RelayStats {
	if m.relay == nil {
		return journal.RelayStats{}
	}
	return m.relay.Stats()
}

// journalOf returns the store s is, or that it decorates (through driver.Wrapper), if
// that store is a J (a key store or a ledger that keeps a journal). A decorator that
// passes its writes' contexts on (as every decorator does) keeps the journal of the
// store it decorates: the Manager writes through it, with the entry in the context, and
// claims and removes entries on the store itself. One that does not pass them on only
// leaves the journal empty, and the changes are published as without one.
func journalOf[J journal.Store](s any) (J, bool) {
	for {
		if j, ok := s.(J); ok {
			return j, true
		}
		w, ok := s.(driver.Wrapper)
		if !ok {
			var none J
			return none, false
		}
		s = w.Unwrap()
	}
}

// startRelay makes the relay of the stores' journals, if they keep any, and runs it
// every interval unless interval is negative.
func (m *Manager) startRelay(opts *Options) error {
	var journals []journal.Store
	if j, ok := journalOf[journal.KeyStore](m.keys); ok {
		m.keyJournal = j
		journals = append(journals, j)
	}
	if j, ok := journalOf[journal.Ledger](m.ledger); ok {
		m.ledgerJournal = j
		if any(j) != any(m.keyJournal) { // one store in both roles keeps one journal
			journals = append(journals, j)
		}
	}
	if len(journals) == 0 {
		return nil
	}
	var ro journal.RelayOptions
	if opts.Relay != nil {
		ro = *opts.Relay
	}
	if ro.Now == nil {
		ro.Now = m.now
	}
	if ro.Logger == nil {
		ro.Logger = m.log
	}
	relay, err := journal.NewRelay(m.events, journals, &ro)
	if err != nil {
		return err
	}
	m.relay = relay
	interval := opts.RelayInterval
	if interval < 0 {
		m.log.Warn("tollgate: the journal of changes is relayed on no schedule (accounts.Options.RelayInterval is negative): call Manager.RelayJournal regularly, or the changes an instance did not publish are never published and the journal grows without bound")
		return nil
	}
	if interval == 0 {
		interval = DefaultRelayInterval
	}
	m.stopRelay = every.Start(interval, every.Chore{Do: m.RelayJournal,
		Failed: "tollgate: cannot relay the changes kept in the journal; the next round tries again",
		Done:   "tollgate: published changes kept in the journal that their instance did not publish",
	}.Run(m.log))
	return nil
}
