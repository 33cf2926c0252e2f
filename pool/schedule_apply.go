package pool

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
)

// outcome is what applying a plan did.
type outcome struct {
	planned int      // keys the plan wants running
	started int      // dispatched
	stopped int      // stopped
	changed int      // restarted or notified with a new payload
	failed  int      // keys whose dispatch, stop or notification failed
	errs    []string // the first maxPlanErrors of them, "key: error"
	err     string   // the plan's own error, or why it was abandoned
	took    time.Duration
}

// maxPlanErrors bounds the per-key errors a schedule's record keeps, and
// the WARN lines a plan logs.
const maxPlanErrors = 10

// planChunk is how many keys one state or bookkeeping script takes.
const planChunk = 500

// Kinds of a plan's steps, in the order a plan takes them: stops first,
// to make room, then changes, then starts.
const (
	stepStop = iota
	stepChange
	stepStart
)

type planStep struct {
	kind    int
	key     string
	payload []byte
	digest  string
}

// apply applies plan as a diff against what runs (see JobPlan), fenced by
// the planner's lease in each shard: once a lease is lost every write in
// its shard is refused, and apply returns.
func (p *planner) apply(ctx context.Context, plan *JobPlan) outcome {
	var out outcome
	fail := func(key string, err error) {
		out.failed++
		if len(out.errs) < maxPlanErrors {
			out.errs = append(out.errs, key+": "+err.Error())
			p.logger.Warn("schedule: a key of the plan failed; the next plan tries again", slog.String("key", key), slog.Any("error", err))
		}
	}
	want := make(map[string][]byte, len(plan.Jobs))
	var order []string
	for _, j := range plan.Jobs {
		if err := checkKey(j.Key); err != nil {
			fail(j.Key, err)
			continue
		}
		if len(j.Payload) > p.n.cfg.maxPayloadSize {
			fail(j.Key, fmt.Errorf("%w: %d bytes, MaxPayloadSize is %d", ErrPayloadTooLarge, len(j.Payload), p.n.cfg.maxPayloadSize))
			continue
		}
		if _, dup := want[j.Key]; !dup {
			order = append(order, j.Key)
		}
		want[j.Key] = j.Payload
	}
	out.planned = len(want)
	check := append([]string(nil), order...)
	listed := make(map[string]bool, len(plan.Stop))
	for _, k := range plan.Stop {
		if err := checkKey(k); err != nil {
			fail(k, err)
			continue
		}
		if _, ok := want[k]; !ok && !listed[k] {
			listed[k] = true
			check = append(check, k)
		}
	}
	if plan.StopOthers {
		ours, err := p.ours(ctx)
		if err != nil {
			out.err = err.Error()
			return out
		}
		for _, k := range ours {
			if _, ok := want[k]; !ok && !listed[k] {
				listed[k] = true
				check = append(check, k)
			}
		}
	}
	state, err := p.state(ctx, check)
	if err != nil {
		out.err = err.Error()
		return out
	}
	steps, adopt, forget, err := p.diff(ctx, want, check, state)
	if err != nil {
		out.err = err.Error()
		return out
	}
	// A key is the schedule's before it is dispatched: were the lease lost
	// before the start is noted, the next planner would not know it.
	var before []string
	for _, s := range steps {
		if s.kind == stepStart {
			before = append(before, s.key, s.digest)
		}
	}
	if err := p.note(ctx, append(before, adopt...), nil); err != nil {
		out.err = err.Error()
		return out
	}
	var mu sync.Mutex
	var set []string
	lost := false
	p.paced(ctx, steps, func(ctx context.Context, s planStep) {
		err := p.do(ctx, s)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case errors.Is(err, errFenced):
			lost = true
			return
		case err != nil && p.n.ctx.Err() != nil:
			lost = true // the node closes
			return
		case err != nil:
			fail(s.key, err)
			return
		}
		switch s.kind {
		case stepStart:
			out.started++
		case stepStop:
			out.stopped++
			forget = append(forget, s.key)
		case stepChange:
			out.changed++
			set = append(set, s.key, s.digest)
		}
	})
	if lost || ctx.Err() != nil {
		out.err = errFenced.Error()
		return out
	}
	if err := p.note(ctx, set, forget); err != nil {
		out.err = err.Error()
	}
	return out
}

// diff compares the plan with state (running, digest noted, of each key
// of check) and returns the steps to take, the keys to adopt (key,
// digest pairs: running with the plan's payload, not noted yet) and the
// keys to forget (noted, not running, not wanted).
func (p *planner) diff(ctx context.Context, want map[string][]byte, check []string, state []keyState) (steps []planStep, adopt, forget []string, err error) {
	var unknown []string // running, wanted, not noted: compare the stored payload
	for i, k := range check {
		st := state[i]
		payload, wanted := want[k]
		switch {
		case wanted && !st.running:
			steps = append(steps, planStep{kind: stepStart, key: k, payload: payload, digest: digest(payload)})
		case wanted && st.digest == "":
			unknown = append(unknown, k)
		case wanted && st.digest != digest(payload):
			steps = append(steps, planStep{kind: stepChange, key: k, payload: payload, digest: digest(payload)})
		case wanted:
		case st.running:
			steps = append(steps, planStep{kind: stepStop, key: k})
		case st.digest != "":
			forget = append(forget, k)
		}
	}
	stored, err := p.payloads(ctx, unknown)
	if err != nil {
		return nil, nil, nil, err
	}
	for i, k := range unknown {
		d := digest(want[k])
		if stored[i] != nil && bytes.Equal(stored[i], want[k]) {
			adopt = append(adopt, k, d)
		} else {
			steps = append(steps, planStep{kind: stepChange, key: k, payload: want[k], digest: d})
		}
	}
	// By kind, each kind in the plan's order (check begins with the
	// plan's keys, in order).
	slices.SortStableFunc(steps, func(a, b planStep) int { return cmp.Compare(a.kind, b.kind) })
	return steps, adopt, forget, nil
}

// do takes one step, fenced in the key's shard.
func (p *planner) do(ctx context.Context, s planStep) error {
	n := p.n.part(s.key)
	f := p.fenceOf(n.shard)
	switch s.kind {
	case stepStart:
		err := n.dispatchJob(ctx, s.key, s.payload, f)
		if errors.Is(err, ErrJobExists) {
			return nil // started meanwhile: it runs, noted as the schedule's
		}
		return err
	case stepStop:
		err := n.stopJob(ctx, s.key, f)
		if errors.Is(err, ErrJobNotFound) {
			return nil
		}
		return err
	}
	if p.cfg.change == NotifyOnChange {
		return n.notifyWorker(ctx, s.key, s.payload, f)
	}
	if err := n.stopJob(ctx, s.key, f); err != nil && !errors.Is(err, ErrJobNotFound) {
		return err
	}
	return n.dispatchJob(ctx, s.key, s.payload, f)
}

// paced runs do for each step, at most cfg.conc at once and cfg.rate a
// second, until ctx ends (the lease was lost). The steps under way then
// finish with the node's context, not ctx: a DispatchJob whose ctx ends
// withdraws its job, and a job admitted while the lease held must not
// be undone (the next planner would start it a second time).
func (p *planner) paced(ctx context.Context, steps []planStep, do func(context.Context, planStep)) {
	sem := make(chan struct{}, p.cfg.conc)
	var wg sync.WaitGroup
	defer wg.Wait()
	per := time.Second / time.Duration(p.cfg.rate)
	next := time.Now()
	for _, s := range steps {
		if d := time.Until(next); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		// Behind (slow dispatches): catch up, but not in one burst.
		next = next.Add(per)
		if floor := time.Now().Add(-100 * time.Millisecond); next.Before(floor) {
			next = floor
		}
		select {
		case <-ctx.Done():
			return
		case sem <- struct{}{}:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			do(p.n.ctx, s)
		}()
	}
}

// digest names a payload in the schedule's notes.
func digest(payload []byte) string {
	return strconv.FormatUint(xxhash.Sum64(payload), 36)
}
