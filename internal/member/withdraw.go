package member

import (
	"context"
	"time"

	"github.com/shepherd-go/shepherd/internal/backoff"
)

// WithdrawnTTL is how long a unit remembers a withdrawn call (a
// DispatchJob or Submit that failed after Redis may have received it): a
// command that reaches Redis later than that, held up in a frozen
// server's or a slow network's buffers, would run after all.
const WithdrawnTTL = 10 * time.Minute

// Withdraw takes back a failed call: it runs try, which records the
// call's nonce as withdrawn (the withdraw_call Lua helper, so that the call is
// refused if it reaches Redis later, checked with was_withdrawn) and undoes
// what the call did if it ran, until try succeeds or ctx ends. Each try
// gets callTimeout. The retries back off from 100ms to 2s with jitter,
// since the usual cause is a Redis that does not answer. failed, if not
// nil, is told of each failed try (the first deserves a warning: the call
// may yet run). It returns how many tries ran and, when ctx ended first,
// the last try's error: then the call may run.
func Withdraw(ctx context.Context, callTimeout time.Duration, try func(context.Context) error, failed func(tries int, err error)) (int, error) {
	bo := backoff.Backoff{Min: 100 * time.Millisecond, Max: 2 * time.Second}
	for tries := 1; ; tries++ {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := try(cctx)
		cancel()
		if err == nil {
			return tries, nil
		}
		if ctx.Err() != nil {
			return tries, err
		}
		if failed != nil {
			failed(tries, err)
		}
		if !backoff.Sleep(bo.Next(), ctx.Done()) {
			return tries, err
		}
	}
}
