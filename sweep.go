package tollgate

import (
	"context"

	"github.com/tollgate-dev/tollgate/event"
)

// sweepBatch is how many reservations one sweep call voids at most.
const sweepBatch = 1000

// Sweep voids the expired reservations of every account now, in batches, until none is
// left or ctx ends, and returns how many it voided. The background sweep calls it every
// [Options.SweepInterval]; a host that turned that off may call it on its own schedule.
// It does nothing for a ledger that is not a [driver.Sweeper].
func (s *Service) Sweep(ctx context.Context) (int, error) {
	if s.sweeper == nil {
		return 0, nil
	}
	total := 0
	for {
		now := s.now()
		n, err := s.sweeper.Sweep(ctx, now, sweepBatch)
		total += n
		if n > 0 && s.events.Wants(event.ReservationsVoided) {
			s.events.Publish(ctx, &event.Sweep{At: now, Voided: n})
		}
		if err != nil || n < sweepBatch {
			return total, err
		}
	}
}
