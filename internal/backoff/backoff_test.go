package backoff

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestNextDoublesUpToMaxWithJitter(t *testing.T) {
	b := Backoff{Min: 100 * time.Millisecond, Max: 700 * time.Millisecond}
	for i, want := range []time.Duration{100, 200, 400, 700, 700, 700} {
		want *= time.Millisecond
		got := b.Next()
		assert.LessOrEqual(t, got, want, "retry %d", i)
		assert.GreaterOrEqual(t, got, want-want/5, "retry %d: more than 20%% jitter", i)
	}
	b.Reset()
	assert.LessOrEqual(t, b.Next(), 100*time.Millisecond, "Reset starts over at Min")
}

func TestSleepEndsWhenDoneCloses(t *testing.T) {
	done := make(chan struct{})
	close(done)
	assert.False(t, Sleep(time.Hour, done))
	assert.True(t, Sleep(time.Millisecond, make(chan struct{})))
}
