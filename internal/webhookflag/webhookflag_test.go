package webhookflag

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tollgate-dev/tollgate/webhook"
)

func TestParseSchedule(t *testing.T) {
	for _, tt := range []struct {
		value   string
		want    webhook.Schedule
		wantErr string // a fragment of the error, "" for none
	}{
		{"", nil, ""},
		{" ", nil, ""},
		{"1s", webhook.Schedule{time.Second}, ""},
		{"250ms, 1s,5m", webhook.Schedule{250 * time.Millisecond, time.Second, 5 * time.Minute}, ""},
		{"1s,,5s", nil, `"" is not a duration`},
		{"soon", nil, `"soon" is not a duration`},
		{"1s,0s", nil, "must be positive"},
		{"-1s", nil, "must be positive"},
		{"1000h", nil, "over the limit"},
		{strings.Repeat("1s,", webhook.MaxScheduleSteps) + "1s", nil, "waits, over the limit"},
	} {
		got, err := ParseSchedule(tt.value)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "-webhook-schedule") {
				t.Errorf("ParseSchedule(%q) = %v, %v; want an error naming the flag and mentioning %s", tt.value, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) || (got == nil) != (tt.want == nil) {
			t.Errorf("ParseSchedule(%q) = %v, %v; want %v", tt.value, got, err, tt.want)
		}
	}
}
