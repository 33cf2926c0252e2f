package limit

import (
	"sync"
	"sync/atomic"
	"time"
)

// outcome is how a request holding a Token ended.
type outcome uint8

const (
	outcomeSuccess outcome = iota
	outcomeDropped
	outcomeIgnored
)

// releaser is what a Token returns its slot to.
type releaser interface {
	release(h held, o outcome)
}

// Token is one admitted request's slot in a Limiter. It measures the
// request's RTT from Acquire to the call that reports the outcome.
//
// Exactly one of Success, Dropped or Ignore must be called once the request
// has ended; until then the slot stays taken, so a forgotten Token lowers
// the limiter's capacity for good. Only the first call counts: later ones,
// on the Token or on any copy of it, are no-ops, and all three are safe for
// concurrent use. The zero Token (returned with an error) does nothing,
// which lets callers defer a release before checking Acquire's error.
//
// A Token is a small value; copy it freely. Its state is recycled after
// release, and a generation number keeps a stale copy from releasing the
// slot of the request that reuses the state.
type Token struct {
	s   *tokenState
	gen uint64
}

// tokenState is the pooled part of a Token; gen advances on each release.
type tokenState struct {
	gen      atomic.Uint64
	owner    releaser
	start    time.Duration // clock reading at admission
	inFlight int
	part     int   // partition index (Partitioned)
	inner    Token // the wrapped limiter's token (Blocking)
}

// held is a released Token's data, handed to its owner.
type held struct {
	start    time.Duration
	inFlight int
	part     int
	inner    Token
	rtt      time.Duration // the caller's RTT (Report), when rttSet
	rttSet   bool
}

var tokenPool = sync.Pool{New: func() any { return new(tokenState) }}

func newToken(owner releaser, h held) Token {
	s := tokenPool.Get().(*tokenState)
	s.owner, s.start, s.inFlight, s.part, s.inner = owner, h.start, h.inFlight, h.part, h.inner
	return Token{s: s, gen: s.gen.Load()}
}

// Success reports that the request completed normally: its RTT feeds the
// limit algorithm.
func (t Token) Success() { t.finish(outcomeSuccess, held{}) }

// Dropped reports that the request failed or timed out because of load:
// the limit algorithm backs off.
func (t Token) Dropped() { t.finish(outcomeDropped, held{}) }

// Ignore releases the slot without feeding the algorithm, for requests
// whose RTT says nothing about load (a validation error, a cancelled
// client).
func (t Token) Ignore() { t.finish(outcomeIgnored, held{}) }

// Report is Success, or Dropped if dropped, with an RTT the caller
// measured instead of the time since Acquire. It is for slots held around
// more than the request: a queue takes its slot before the task leaves
// Redis and frees it once the task's end is recorded there, and only the
// handler's own time says anything about the downstream's load.
func (t Token) Report(rtt time.Duration, dropped bool) {
	o := outcomeSuccess
	if dropped {
		o = outcomeDropped
	}
	t.finish(o, held{rtt: rtt, rttSet: true})
}

// finish releases the slot; by carries the caller's RTT, if any.
func (t Token) finish(o outcome, by held) {
	s := t.s
	if s == nil || !s.gen.CompareAndSwap(t.gen, t.gen+1) {
		return
	}
	owner := s.owner
	h := held{start: s.start, inFlight: s.inFlight, part: s.part, inner: s.inner, rtt: by.rtt, rttSet: by.rttSet}
	s.owner, s.inner = nil, Token{}
	tokenPool.Put(s)
	owner.release(h, o)
}

// adaptive holds an Algorithm and the limit it last returned, shared by the
// limiters: reading the limit is one atomic load, and updates are
// serialized because algorithms are not safe for concurrent use.
type adaptive struct {
	limit atomic.Int64
	clock clock
	fixed bool // a Fixed algorithm: nothing to feed

	mu  sync.Mutex
	alg Algorithm
}

func (a *adaptive) init(alg Algorithm, c clock) {
	a.alg, a.clock = alg, c
	_, a.fixed = alg.(*Fixed)
	a.limit.Store(int64(max(1, alg.Limit())))
}

// update feeds h's outcome to the algorithm and publishes the new limit.
func (a *adaptive) update(h held, o outcome) {
	if o == outcomeIgnored || a.fixed {
		return
	}
	rtt := h.rtt
	if !h.rttSet {
		rtt = a.clock.read() - h.start
	}
	s := Sample{RTT: rtt, InFlight: h.inFlight, Dropped: o == outcomeDropped}
	a.mu.Lock()
	n := a.alg.Update(s)
	a.limit.Store(int64(max(1, n)))
	a.mu.Unlock()
}
