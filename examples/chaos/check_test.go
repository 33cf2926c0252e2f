package chaos

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The checker must catch what it is there to catch: a synthetic log with
// one of each violation.
func TestCheckFindsViolations(t *testing.T) {
	t.Parallel()
	var ms int64 = 1_000_000
	e := func(ev, proc, worker, key string) Entry {
		ms += 10
		return Entry{Event: ev, Proc: proc, Worker: worker, Key: key, Ms: ms}
	}
	log := []Entry{
		e(EvStart, "p1", "w0", "ok"), e(EvDispatch, "", "", "ok"),
		e(EvStart, "p1", "w0", "lost"), e(EvDispatch, "", "", "lost"),
		e(EvStart, "p1", "w1", "dup"), e(EvDispatch, "", "", "dup"),
		e(EvStart, "p1", "w1", "zombie"), e(EvDispatch, "", "", "zombie"), e(EvStopJob, "", "", "zombie"),
		e(EvStart, "p2", "w0", "moved"), e(EvDispatch, "", "", "moved"),
		e(EvStart, "p1", "w0", "unknown"), e(EvUnknown, "", "", "unknown"),
		e(EvStop, "p1", "w0", "lost"),
		e(EvStart, "p3", "w0", "dup"), // overlap opens, never closes
		e(EvKill, "p2", "", ""),
		e(EvStart, "p2", "w0", "late"), // a write after the kill: ignored
	}
	ms += 980 // the moved job restarts 1s after the kill (10ms per entry)
	log = append(log, e(EvStart, "p3", "w1", "moved"),
		e(EvFreeze, "p3", "", ""), e(EvStart, "p1", "w2", "moved"),
		e(EvThaw, "p3", "", ""), e(EvStop, "p3", "w1", "moved"))
	r := Check(log)
	assert.Equal(t, []string{"lost"}, r.Lost)
	assert.Equal(t, []string{"dup"}, r.Duplicates)
	assert.Equal(t, []string{"zombie"}, r.Zombies)
	require.Len(t, r.Recoveries, 1)
	assert.Equal(t, time.Second, r.Recoveries[0])
	require.Len(t, r.PerKill, 1)
	assert.Equal(t, KillStat{Proc: "p2", Jobs: 1, First: time.Second, Last: time.Second}, r.PerKill[0])
	assert.Len(t, r.Overlaps, 2, "dup (open) and moved (closed by the stale stop)")
	require.Len(t, r.StaleAfterThaw, 1)
	assert.Equal(t, 10*time.Millisecond, r.StaleAfterThaw[0])
	require.Len(t, r.PauseRecoveries, 1, "moved was held by the frozen p3")
	assert.Equal(t, 10*time.Millisecond, r.PauseRecoveries[0])
	assert.Equal(t, []string{"dup"}, r.UnmovedAtThaw, "dup ran on p3 too, and never started again")
	assert.Equal(t, []string{"p1/w2"}, r.Running["moved"])
	assert.Empty(t, r.Running["late"])
	assert.Len(t, r.Running["unknown"], 1, "an unknown key may run")
	assert.Error(t, r.AtRest())
	assert.Equal(t, 3, r.StartsPerKey["moved"])
	assert.Equal(t, 1, r.MovedMoreThanOnce())
}

// A job of a frozen process that never started elsewhere before the thaw
// is reported, and one stopped meanwhile is not.
func TestCheckUnmovedAtThaw(t *testing.T) {
	t.Parallel()
	r := Check([]Entry{
		{Event: EvStart, Proc: "p1", Worker: "w0", Key: "held", Ms: 1},
		{Event: EvStart, Proc: "p1", Worker: "w0", Key: "stopped", Ms: 2},
		{Event: EvStart, Proc: "p1", Worker: "w0", Key: "moved", Ms: 3},
		{Event: EvFreeze, Proc: "p1", Ms: 10},
		{Event: EvStopJob, Key: "stopped", Ms: 11},
		{Event: EvStart, Proc: "p2", Worker: "w0", Key: "moved", Ms: 2010},
		{Event: EvThaw, Proc: "p1", Ms: 5000},
	})
	assert.Equal(t, []string{"held"}, r.UnmovedAtThaw)
	assert.Equal(t, []time.Duration{2 * time.Second}, r.PauseRecoveries)
	assert.Contains(t, r.Summary(), "not moved by the thaw 1")
}

func TestCheckCleanLog(t *testing.T) {
	t.Parallel()
	r := Check([]Entry{
		{Event: EvStart, Proc: "p1", Worker: "w0", Key: "a", Ms: 1},
		{Event: EvDispatch, Key: "a", Ms: 2},
		{Event: EvStop, Proc: "p1", Worker: "w0", Key: "a", Ms: 3},
		{Event: EvStart, Proc: "p2", Worker: "w0", Key: "a", Ms: 4},
		{Event: EvExit, Proc: "p1", Ms: 5},
	})
	require.NoError(t, r.AtRest())
	assert.Empty(t, r.Overlaps)
	assert.Empty(t, r.ExitedHolding)
	assert.Contains(t, r.Summary(), "dispatched 1")
}

func TestPercentile(t *testing.T) {
	t.Parallel()
	ds := []time.Duration{5, 1, 4, 2, 3}
	assert.Equal(t, time.Duration(3), Percentile(ds, 50))
	assert.Equal(t, time.Duration(5), Percentile(ds, 99))
	assert.Equal(t, time.Duration(1), Percentile(ds, 1))
	assert.Zero(t, Percentile(nil, 50))
}

// A key's last handler event is what leaves it running or not: the stop
// of a frozen process's stale copy, after the key started elsewhere, is
// not its last event (the fresh run goes on); the stop of the only run
// is, also when it comes from the process that last started it.
func TestCheckLastEventOfAMovedKey(t *testing.T) {
	t.Parallel()
	r := Check([]Entry{
		{Event: EvStart, Proc: "p1", Worker: "w0", Key: "moved", Ms: 1},
		{Event: EvStart, Proc: "p1", Worker: "w1", Key: "stopped", Ms: 2},
		{Event: EvFreeze, Proc: "p1", Ms: 10},
		{Event: EvStart, Proc: "p2", Worker: "w0", Key: "moved", Ms: 1010},
		{Event: EvThaw, Proc: "p1", Ms: 3000},
		{Event: EvStop, Proc: "p1", Worker: "w0", Key: "moved", Ms: 3010},
		{Event: EvStop, Proc: "p1", Worker: "w1", Key: "stopped", Ms: 3020},
	})
	assert.Equal(t, Entry{Event: EvStart, Proc: "p2", Worker: "w0", Key: "moved", Ms: 1010}, r.Last["moved"])
	assert.True(t, r.LastRuns["moved"])
	assert.Equal(t, EvStop, r.Last["stopped"].Event)
	assert.False(t, r.LastRuns["stopped"])
}
