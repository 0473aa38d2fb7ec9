package meter_test

import "time"

var t0 = time.Date(2025, time.March, 14, 15, 9, 26, 0, time.UTC)
