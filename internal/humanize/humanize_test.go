package humanize

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestDuration(t *testing.T) {
	t.Parallel()
	for d, want := range map[time.Duration]string{
		0:                                     "0s",
		420:                                   "420ns",
		420 * time.Microsecond:                "420µs",
		4210 * time.Nanosecond:                "4.21µs",
		999_999 * time.Nanosecond:             "1ms",
		12_345 * time.Microsecond:             "12.3ms",
		250 * time.Millisecond:                "250ms",
		30_004_150 * time.Microsecond:         "30s",
		1250 * time.Millisecond:               "1.25s",
		2*time.Minute + 5400*time.Millisecond: "2m5s",
		time.Hour + 2*time.Minute + 40*time.Second: "1h3m",
		-3 * time.Millisecond:                      "-3ms",
	} {
		assert.Equal(t, want, Duration(d), "%d ns", int64(d))
	}
}
