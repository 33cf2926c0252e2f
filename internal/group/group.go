// Package group owns goroutines: a Group starts them, tells them to stop
// and waits for them, so that no goroutine of shepherd runs without an
// owner who knows when it has ended.
package group

import (
	"context"
	"sync"
)

// Group runs goroutines until it is stopped. The zero Group is not
// usable; use New. A Group is safe for concurrent use.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
}

// New returns a Group whose context is derived from parent.
func New(parent context.Context) *Group {
	ctx, cancel := context.WithCancel(parent)
	return &Group{ctx: ctx, cancel: cancel}
}

// Context returns the group's context, cancelled by Stop: the goroutines'
// signal to return.
func (g *Group) Context() context.Context { return g.ctx }

// Go runs f on a new goroutine of the group and reports true, or reports
// false and runs nothing once the group is closed (Close or Stop).
func (g *Group) Go(f func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		f()
	}()
	return true
}

// Close refuses new goroutines; those running go on. It is idempotent.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
}

// Stop refuses new goroutines and cancels the group's context. It is
// idempotent.
func (g *Group) Stop() {
	g.Close()
	g.cancel()
}

// Wait waits until every goroutine of the group has returned. Call it
// after Close or Stop, or it may wait for goroutines started meanwhile.
func (g *Group) Wait() { g.wg.Wait() }

// WaitContext is Wait until ctx ends: it returns ctx's error if some
// goroutines are still running then.
func (g *Group) WaitContext(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		g.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
