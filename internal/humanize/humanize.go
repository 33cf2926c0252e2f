// Package humanize renders values for people, the same way in the CLI and
// the dashboard.
package humanize

import (
	"strconv"
	"strings"
	"time"
)

// Duration renders d in the unit that suits it, with three significant
// digits below a minute: 420µs, 12.3ms, 1.25s, 30s; then whole seconds
// (2m5s) and, from an hour, whole minutes (1h2m). A sub-millisecond
// handler's time is not "0s", and a 30.00415s timeout is not printed to
// the nanosecond.
func Duration(d time.Duration) string {
	if d < 0 {
		return "-" + Duration(-d)
	}
	switch {
	case d == 0:
		return "0s"
	case d < time.Microsecond:
		return strconv.FormatInt(int64(d), 10) + "ns"
	}
	// The first unit in which d reads below 1000 (below 60 for seconds)
	// once rounded to three digits.
	for _, u := range []struct {
		unit  time.Duration
		name  string
		below float64
	}{{time.Microsecond, "µs", 999.5}, {time.Millisecond, "ms", 999.5}, {time.Second, "s", 59.95}} {
		if v := float64(d) / float64(u.unit); v < u.below {
			return strconv.FormatFloat(v, 'g', 3, 64) + u.name
		}
	}
	if d < time.Hour-30*time.Second {
		return d.Round(time.Second).String()
	}
	return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
}
