package queue

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func ms(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

// Ticks are the same in every process: cron in UTC (not the process's
// local zone) or the schedule's zone, intervals from the anchor.
func TestSpecTicks(t *testing.T) {
	t.Parallel()
	at := ms("2026-03-28T23:59:59.250Z")
	for _, tc := range []struct {
		spec, tz string
		want     []string
	}{
		{"0 * * * *", "", []string{"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z"}},
		{"30 0 * * * *", "", []string{"2026-03-29T00:00:30Z", "2026-03-29T01:00:30Z"}},
		{"@hourly", "", []string{"2026-03-29T00:00:00Z", "2026-03-29T01:00:00Z"}},
		{"@daily", "", []string{"2026-03-29T00:00:00Z", "2026-03-30T00:00:00Z"}},
		// Paris goes from UTC+1 to UTC+2 on 2026-03-29 at 01:00 UTC.
		{"0 3 * * *", "Europe/Paris", []string{"2026-03-29T01:00:00Z", "2026-03-30T01:00:00Z"}},
		{"0 9 * * *", "America/New_York", []string{"2026-03-29T13:00:00Z", "2026-03-30T13:00:00Z"}},
		{"@every 1s", "", []string{"2026-03-29T00:00:00.25Z", "2026-03-29T00:00:01.25Z"}},
		{"@every 1h30m", "", []string{"2026-03-29T01:29:59.25Z", "2026-03-29T02:59:59.25Z"}},
	} {
		s, err := parseSpec(tc.spec, tc.tz, at)
		require.NoError(t, err, tc.spec)
		var got []string
		for n := s.next(at); len(got) < 2; n = s.next(n) {
			got = append(got, n.UTC().Format(time.RFC3339Nano))
		}
		assert.Equal(t, tc.want, got, "%s in %q", tc.spec, tc.tz)
	}
}

func TestBadSpecsAreRefused(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ spec, tz string }{
		{"", ""}, {"  ", ""}, {"* * *", ""}, {"61 * * * *", ""}, {"* * * * * * *", ""}, {"@fortnightly", ""},
		{"@every", ""}, {"@every 1x", ""}, {"@every 999ms", ""}, {"@every 1500us", ""}, {"@every -1s", ""},
		{"@every 1s", "Europe/Paris"}, {"0 * * * *", "Mars/Olympus"}, {"CRON_TZ=UTC 0 * * * *", ""}, {"TZ=UTC 0 * * * *", ""},
	} {
		_, err := parseSpec(tc.spec, tc.tz, time.Now())
		assert.ErrorIs(t, err, ErrInvalidOption, "%q in %q", tc.spec, tc.tz)
	}
}

// dueTicks sends the ticks on time, and the catch-up most recent missed
// ones (at least one, so that the script skips past them all); a long
// gap is not walked tick by tick.
func TestDueTicksBoundsTheCatchUp(t *testing.T) {
	t.Parallel()
	at := ms("2026-01-01T00:00:00Z")
	s, err := parseSpec("@every 1s", "", at)
	require.NoError(t, err)
	cron, err := parseSpec("* * * * * *", "", at)
	require.NoError(t, err)
	now := at.Add(20*time.Second + 500*time.Millisecond)
	for _, sp := range []tickSpec{s, cron} {
		// Ticks 1..20; those before now-5s (1..15) are missed.
		got := sp.dueTicks(at, now, 0)
		require.Len(t, got, 6)
		assert.Equal(t, at.Add(15*time.Second), got[0], "the latest missed tick, to skip")
		assert.Equal(t, at.Add(20*time.Second), got[5])
		got = sp.dueTicks(at, now, 3)
		require.Len(t, got, 8)
		assert.Equal(t, at.Add(13*time.Second), got[0])
		assert.Equal(t, now.Add(-500*time.Millisecond), got[7])
		assert.Empty(t, sp.dueTicks(now, now, 3))
	}
	// A week of missed ticks every second.
	start := time.Now()
	got := cron.dueTicks(at, at.Add(7*24*time.Hour), MaxCatchUp)
	assert.Len(t, got, MaxCatchUp+6)
	assert.Less(t, time.Since(start), time.Second)
}

func TestTickIDs(t *testing.T) {
	t.Parallel()
	tick := ms("2026-01-02T03:04:05.678+01:00")
	id := tickID("reports@eu", tick)
	assert.Equal(t, "reports@eu@2026-01-02T02:04:05.678Z", id)
	name, at, ok := TickOf(id)
	assert.True(t, ok)
	assert.Equal(t, "reports@eu", name)
	assert.True(t, at.Equal(tick))
	for _, id := range []string{"plain", "@2026-01-02T02:04:05.678Z", "x@now-abc", "x@2026-01-02"} {
		_, _, ok := TickOf(id)
		assert.False(t, ok, id)
	}
	assert.LessOrEqual(t, len(tickID(string(make([]byte, MaxScheduleNameSize)), tick)), MaxTaskIDSize)
}
