// Package limit learns how many requests a service can have in flight and
// enforces that number.
//
// An RPS number set once goes stale; a concurrency limit can be learned. By
// Little's Law, limit = throughput × latency: while latency stays near its
// floor, more concurrency buys more throughput, and once latency climbs the
// extra requests only queue. The algorithms here find that point the way
// TCP finds a congestion window.
//
// # Algorithms
//
// An Algorithm takes Samples (RTT, in-flight count, dropped) and returns the
// limit. Fixed is a constant; AIMD adds one on success and multiplies by
// 0.9 on a drop; Vegas estimates the queue from the RTT over the lowest RTT
// seen; Gradient2 compares a short and a long average of the RTT. Windowed
// wraps any of them to feed one aggregated sample per time window.
// Algorithms are deterministic: time comes from injectable clocks.
//
// # Enforcement
//
// A Limiter admits requests: Simple with one in-flight gauge, Partitioned
// with guaranteed shares per named partition, Blocking waits in a FIFO line
// instead of rejecting. Acquire returns a Token that measures the RTT and
// must be released with Success, Dropped or Ignore:
//
//	t, err := lim.Acquire(ctx)
//	if err != nil {
//		return err // errors.Is(err, limit.ErrLimitExceeded): shed the load
//	}
//	err = call(ctx)
//	if err != nil { t.Dropped() } else { t.Success() }
//
// AdaptiveExecutor runs tasks at the limiter's concurrency; Middleware and
// Transport guard net/http servers (429 with Retry-After) and clients.
//
// # Cost
//
// Acquire is one compare-and-swap, one monotonic clock read and a pooled
// Token (no allocation); a release adds one clock read and, unless the
// algorithm is Fixed, one mutex-guarded algorithm update. Measured with go
// test -bench on the project's 2-core CI VM (go1.26, amd64), a Simple
// Acquire+Success pair costs about 70 ns with Fixed and 190–260 ns with
// Gradient2 or Vegas uncontended, and about 100 ns (Fixed) to 500 ns
// (adaptive, the update mutex contended) with 64 goroutines. Everything
// here is safe for concurrent use except the Algorithms themselves, which
// their limiter serializes. The package needs no Redis.
package limit
