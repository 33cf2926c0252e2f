package limit

import "time"

// epoch is the origin of the package's monotonic readings.
var epoch = time.Now()

// clock reads time as a duration since epoch. The zero clock uses the
// monotonic clock alone, via time.Since, which costs one clock read where
// time.Now costs two (wall and monotonic): it halves the cost of measuring
// an RTT on the hot path. A clock made from a func() time.Time (a test's
// fake clock) reads that instead.
type clock struct {
	now func() time.Time
}

func (c clock) read() time.Duration {
	if c.now == nil {
		return time.Since(epoch)
	}
	return c.now().Sub(epoch)
}
