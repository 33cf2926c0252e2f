package redisutil

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestTimedOutTellsTheCallsBoundFromItsParent(t *testing.T) {
	ioTimeout := fmt.Errorf("op: %w", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded})
	deadline := fmt.Errorf("op: %w", context.DeadlineExceeded)

	live, cancel := CallContext(context.Background(), time.Hour)
	defer cancel()
	assert.False(t, TimedOut(live, nil))
	assert.False(t, TimedOut(live, errors.New("ERR something")))
	assert.True(t, TimedOut(live, ioTimeout), "the client's own read timeout")
	assert.False(t, TimedOut(live, deadline), "no deadline of ours passed")
	assert.False(t, CallTimedOut(live))

	bounded, cancel := CallContext(context.Background(), time.Millisecond)
	defer cancel()
	<-bounded.Done()
	assert.True(t, CallTimedOut(bounded))
	assert.True(t, TimedOut(bounded, deadline), "the call's own bound ran out")
	assert.True(t, TimedOut(bounded, ioTimeout))
	assert.False(t, TimedOut(bounded, errors.New("ERR something")))

	parent, cancelParent := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancelParent()
	fromParent, cancel := CallContext(parent, time.Hour)
	defer cancel()
	<-fromParent.Done()
	assert.False(t, CallTimedOut(fromParent))
	assert.False(t, TimedOut(fromParent, deadline), "the parent's deadline: its error stands")
	assert.False(t, TimedOut(fromParent, ioTimeout), "the socket deadline was the parent's")

	gone, cancelGone := context.WithCancel(context.Background())
	cancelled, cancel := CallContext(gone, time.Hour)
	defer cancel()
	cancelGone()
	assert.False(t, TimedOut(cancelled, fmt.Errorf("op: %w", context.Canceled)))
}
