package main

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/shepherd-go/shepherd/pool"
)

// demoState is what the demo's handlers did, as the demo's ground truth:
// which worker runs which key. Workers of a crashed node are dead: what
// they held no longer counts, and they are not called again.
type demoState struct {
	mu       sync.Mutex
	running  map[string]string // key → worker label
	starts   int
	restarts int // starts with Attempt > 1: moves and recoveries
	doubles  int // starts of a key that a live worker still ran
}

func newDemoState() *demoState { return &demoState{running: map[string]string{}} }

// demoWorker is one worker's JobHandler. A real handler would start a
// goroutine or a subscription in Start; the demo only records.
type demoWorker struct {
	label string
	state *demoState
	dead  *atomic.Bool // its node crashed
}

func (w *demoWorker) Start(ctx context.Context, job *pool.Job) error {
	if w.dead.Load() {
		return nil
	}
	s := w.state
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.running[job.Key]; ok {
		s.doubles++
	}
	s.running[job.Key] = w.label
	s.starts++
	if job.Attempt > 1 {
		s.restarts++
	}
	return nil
}

func (w *demoWorker) Stop(ctx context.Context, key string) error {
	if w.dead.Load() {
		return nil
	}
	s := w.state
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[key] == w.label {
		delete(s.running, key)
	}
	return nil
}

// crash forgets what the workers labelled in labels ran: their process is
// gone.
func (s *demoState) crash(labels map[string]bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, l := range s.running {
		if labels[l] {
			delete(s.running, k)
			n++
		}
	}
	return n
}

// snapshot returns how many keys run and the count per worker label.
func (s *demoState) snapshot() (int, map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	per := map[string]int{}
	for _, l := range s.running {
		per[l]++
	}
	return len(s.running), per
}

// missing returns the keys of want that no live worker runs.
func (s *demoState) missing(want []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, k := range want {
		if _, ok := s.running[k]; !ok {
			out = append(out, k)
		}
	}
	return out
}
