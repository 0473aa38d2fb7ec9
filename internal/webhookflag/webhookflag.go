// Package webhookflag parses the webhook flags of the example servers.
package webhookflag

import (
	"fmt"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/webhook"
)

// ParseSchedule parses the value of -webhook-schedule: the waits between a delivery's
// attempts, as Go durations separated by commas ("1s,5s,30s": an attempt at once,
// then retries 1, 5 and 30 seconds after the attempt before), checked as
// [webhook.Schedule.Check] checks them. An empty value is a nil schedule: the
// deliverer's default ([webhook.DefaultSchedule]).
func ParseSchedule(value string) (webhook.Schedule, error) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var s webhook.Schedule
	for part := range strings.SplitSeq(value, ",") {
		w, err := time.ParseDuration(strings.TrimSpace(part))
		if err != nil {
			return nil, fmt.Errorf("-webhook-schedule %q: %q is not a duration; give waits such as 1s,5s,30s", value, strings.TrimSpace(part))
		}
		s = append(s, w)
	}
	if err := s.Check(); err != nil {
		return nil, fmt.Errorf("-webhook-schedule %q: %w", value, err)
	}
	return s, nil
}
