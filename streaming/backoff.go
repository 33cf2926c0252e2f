package streaming

import (
	"math/rand/v2"
	"time"
)

// backoff is a capped exponential backoff with jitter. It is owned by one
// goroutine.
type backoff struct {
	min, max time.Duration
	cur      time.Duration // 0 after reset
}

// next returns the wait before the next retry: min first, then doubling
// up to max, each with up to 20% jitter so that many sinks that lost the
// same Redis do not retry in lockstep.
func (b *backoff) next() time.Duration {
	switch {
	case b.cur == 0:
		b.cur = b.min
	case b.cur < b.max:
		b.cur = min(2*b.cur, b.max)
	}
	return b.cur - time.Duration(rand.Int64N(int64(b.cur)/5+1))
}

// reset starts over at min after a success.
func (b *backoff) reset() { b.cur = 0 }

// sleep waits for d or until done is closed, and reports whether the full
// wait passed.
func sleep(d time.Duration, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
