package usagehttp_test

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/internal/usagehttp"
	"github.com/tollgate-dev/tollgate/usage"
)

var now = time.Date(2030, time.January, 15, 12, 30, 0, 0, time.UTC)

// The defaults: to is now, from is to less a span that depends on the interval.
func TestQueryDefaults(t *testing.T) {
	for _, c := range []struct {
		params   string
		interval usage.Resolution
		from, to time.Time
	}{
		{"", usage.Day, now.Add(-30 * 24 * time.Hour), now},
		{"interval=hour", usage.Hour, now.Add(-24 * time.Hour), now},
		{"interval=minute", usage.Minute, now.Add(-time.Hour), now},
		{"to=2030-01-10", usage.Day, time.Date(2029, time.December, 11, 0, 0, 0, 0, time.UTC), time.Date(2030, time.January, 10, 0, 0, 0, 0, time.UTC)},
		{"from=2030-01-01T10:00:00%2B02:00&to=2030-01-02", usage.Day, time.Date(2030, time.January, 1, 8, 0, 0, 0, time.UTC), time.Date(2030, time.January, 2, 0, 0, 0, 0, time.UTC)},
	} {
		v, err := url.ParseQuery(c.params)
		if err != nil {
			t.Fatal(err)
		}
		q, err := usagehttp.Query(v, now)
		if err != nil || q.Interval != c.interval || !q.From.Equal(c.from) || !q.To.Equal(c.to) || q.Account != "" {
			t.Errorf("?%s: %+v, %v; want %v from %v to %v", c.params, q, err, c.interval, c.from, c.to)
		}
	}
}

// A parameter to fix is a CodeInvalidInput error naming it, which wraps a
// *usage.QueryError.
func TestQueryErrors(t *testing.T) {
	for _, c := range []struct{ params, param string }{
		{"from=yesterday", "from"}, {"to=2030-02-30", "to"}, {"interval=week", "interval"}, {"by=plan", "by"},
		{"from=0001-01-01", "from"}, {"to=9999-01-01", "to"}, {"from=1969-12-31T23:59:59Z", "from"},
	} {
		v, _ := url.ParseQuery(c.params)
		_, err := usagehttp.Query(v, now)
		var qe *usage.QueryError
		if tollgate.CodeOf(err) != tollgate.CodeInvalidInput || !errors.As(err, &qe) || qe.Param != c.param ||
			!strings.HasPrefix(err.(*tollgate.Error).Message, c.param+": ") {
			t.Errorf("?%s: %v, want invalid_input naming %s", c.params, err, c.param)
		}
	}
	if !usagehttp.Asks(url.Values{"by": {"api"}}) || usagehttp.Asks(url.Values{"other": {"1"}}) {
		t.Error("Asks")
	}
}
