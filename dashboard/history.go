package dashboard

import (
	"context"
	"sync"
	"time"

	"github.com/shepherd-go/shepherd/pool"
)

// sample is one reading of a pool's or a queue's counts, for the charts.
type sample struct {
	Time   time.Time `json:"time"`
	Values []int64   `json:"values"`
}

// poolSeries names the pool chart's series, in the order of
// sample.Values.
var poolSeries = []string{"queued", "pending", "running", "jobs"}

// history keeps the recent samples of every pool looked at. Queues have
// no samples here: their processes keep their history in Redis
// (queue.Client.History), which the queue page reads.
type history struct {
	mu     sync.Mutex
	keep   int
	series map[string][]sample // "pool:NAME"
	seen   time.Time           // the last page view: the sampler idles without views
}

func newHistory(keep int) *history {
	return &history{keep: max(keep, 2), series: map[string][]sample{}}
}

// add appends a sample to the series id, dropping the oldest beyond keep.
func (h *history) add(id string, s sample) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ss := append(h.series[id], s)
	if len(ss) > h.keep {
		ss = append(ss[:0:0], ss[len(ss)-h.keep:]...)
	}
	h.series[id] = ss
}

// get returns a copy of the series id, and notes that it was looked at.
func (h *history) get(id string) []sample {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen = time.Now()
	return append([]sample(nil), h.series[id]...)
}

// touch notes a page view that shows every pool.
func (h *history) touch() {
	h.mu.Lock()
	h.seen = time.Now()
	h.mu.Unlock()
}

// idleAfter is how long the sampler keeps going after the last page view.
const idleAfter = 10 * time.Minute

// sampleLoop samples every pool found, every SampleEvery, while
// pages are being looked at, so that a chart has minutes of history when
// it is opened; without views it reads nothing.
func (s *Handler) sampleLoop(ctx context.Context) {
	defer close(s.done)
	tick := time.NewTicker(s.cfg.sampleEvery)
	defer tick.Stop()
	var pools []string
	var listed time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		s.hist.mu.Lock()
		idle := time.Since(s.hist.seen) > idleAfter
		s.hist.mu.Unlock()
		if idle {
			continue
		}
		rctx, cancel := context.WithTimeout(ctx, s.cfg.sampleEvery)
		if time.Since(listed) > 10*time.Second {
			if p, _, err := Names(rctx, s.rdb); err == nil {
				pools, listed = p, time.Now()
			}
		}
		for i, name := range pools {
			if i >= maxSampled {
				break
			}
			if st, err := pool.Inspect(rctx, s.rdb, name); err == nil {
				s.hist.add("pool:"+name, poolSample(st))
			}
		}
		cancel()
	}
}

// maxSampled bounds how many pools are sampled.
const maxSampled = 100

func poolSample(st *pool.Stats) sample {
	return sample{Time: st.Time, Values: []int64{st.QueueDepth, st.Pending, int64(st.Running), int64(st.Jobs)}}
}
