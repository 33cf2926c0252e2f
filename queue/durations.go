package queue

import (
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// tookKept is how many recent handler run times a server keeps for its
// percentiles.
const tookKept = 512

// durations keeps the last tookKept handler run times of a server, for
// the percentiles its keep-alive publishes (ProcessInfo.P50…). The
// process's OpenTelemetry histogram (MetricProcessing) has the full
// distribution; these are for the operators' tools, without a metrics
// pipeline.
type durations struct {
	mu   sync.Mutex
	ring []time.Duration
	next int
	// avg is a moving average of the run times (weight 1/8 for the
	// latest), in ns, 0 before the first: how many tasks the workers end
	// soon, for taking ahead (aheadDepth). Read without the lock.
	avg atomic.Int64
}

// recent is the moving average of the run times (0: none yet).
func (d *durations) recent() time.Duration { return time.Duration(d.avg.Load()) }

func (d *durations) add(v time.Duration) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a := d.avg.Load(); a == 0 {
		d.avg.Store(max(int64(v), 1))
	} else {
		d.avg.Store(max(a+(int64(v)-a)/8, 1))
	}
	if len(d.ring) < tookKept {
		d.ring = append(d.ring, v)
		return
	}
	d.ring[d.next] = v
	d.next = (d.next + 1) % tookKept
}

// percentiles returns the 50th, 90th and 99th percentiles of the kept
// run times (nearest rank), and how many there are.
func (d *durations) percentiles() (p50, p90, p99 time.Duration, n int) {
	d.mu.Lock()
	s := slices.Clone(d.ring)
	d.mu.Unlock()
	if len(s) == 0 {
		return 0, 0, 0, 0
	}
	slices.Sort(s)
	at := func(p float64) time.Duration {
		i := int(p*float64(len(s))+0.999999) - 1 // nearest rank: ceil(p·n) - 1
		return s[max(0, min(i, len(s)-1))]
	}
	return at(0.50), at(0.90), at(0.99), len(s)
}
