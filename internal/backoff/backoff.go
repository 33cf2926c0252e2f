// Package backoff paces retries: a capped exponential backoff with
// jitter, and a sleep that ends early when its owner stops.
package backoff

import (
	"math/rand/v2"
	"time"
)

// Backoff is a capped exponential backoff with jitter. Set Min and Max;
// the zero value of the rest is ready. It is owned by one goroutine.
type Backoff struct {
	Min, Max time.Duration
	cur      time.Duration // 0 after Reset
}

// Next returns the wait before the next retry: Min first, then doubling
// up to Max, each with up to 20% taken off at random, so that many
// clients that lost the same Redis do not retry in lockstep.
func (b *Backoff) Next() time.Duration {
	switch {
	case b.cur == 0:
		b.cur = b.Min
	case b.cur < b.Max:
		b.cur = min(2*b.cur, b.Max)
	}
	return b.cur - time.Duration(rand.Int64N(int64(b.cur)/5+1))
}

// Reset starts over at Min after a success.
func (b *Backoff) Reset() { b.cur = 0 }

// Sleep waits for d or until done is closed, and reports whether the full
// wait passed.
func Sleep(d time.Duration, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
