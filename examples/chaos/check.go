package chaos

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"
)

// Overlap is a span during which a key ran on more than one worker.
type Overlap struct {
	Key      string
	From, To time.Time // To is zero if the overlap lasts to the end of the log
	Holders  int       // the most workers at once
	Procs    []string
}

// Duration returns the overlap's length (up to end for an open one).
func (o Overlap) Duration(end time.Time) time.Duration {
	if o.To.IsZero() {
		return end.Sub(o.From)
	}
	return o.To.Sub(o.From)
}

// KillStat is how the jobs of one killed process restarted.
type KillStat struct {
	Proc        string
	Jobs        int           // jobs it ran that restarted elsewhere
	First, Last time.Duration // from the kill to the first and last restart
}

// Report is what Check found in a log.
type Report struct {
	Entries    int
	Dispatched int // acknowledged DispatchJob calls
	StoppedJob int // acknowledged StopJob calls
	Starts     int
	Stops      int
	Kills      int
	Freezes    int
	End        time.Time // the last entry's time

	// Recoveries holds, per job running on a killed process, the time from
	// the kill to its next start elsewhere.
	Recoveries []time.Duration
	// PerKill breaks Recoveries down by kill.
	PerKill []KillStat
	// Unrecovered are the keys of killed processes that never started again
	// (and were not stopped).
	Unrecovered []string
	// Overlaps are the spans during which a key ran on two workers at once.
	Overlaps []Overlap
	// StaleAfterThaw holds, per job of a frozen process that had started
	// elsewhere meanwhile, the time from SIGCONT to its stale copy's Stop.
	StaleAfterThaw []time.Duration
	// PauseRecoveries holds, per job running on a frozen process, the time
	// from the freeze to its next start on another process: how long the
	// pause held it hostage.
	PauseRecoveries []time.Duration
	// UnmovedAtThaw are the jobs of a frozen process that had not started
	// elsewhere when it was thawed (and were not stopped meanwhile).
	UnmovedAtThaw []string
	// StartsPerKey counts the starts of every key.
	StartsPerKey map[string]int
	// ExitedHolding are jobs still running on a process when it exited by
	// itself: its Close or Shutdown did not stop them.
	ExitedHolding []string

	// At rest (end of the log), on live processes:
	Running    map[string][]string // key → workers running it
	Lost       []string            // acknowledged, not stopped, not running
	Duplicates []string            // running on more than one worker
	Zombies    []string            // acknowledged as stopped, still running

	// Last is each key's last handler event (a start or a stop), but for
	// the stop of one of two runs at once (a frozen process's stale copy),
	// which leaves the other's start as the last; LastRuns says whether it
	// leaves the key running: a start on a process that is still live.
	Last     map[string]Entry
	LastRuns map[string]bool
	// Nodes maps the pool node ids the processes logged to their names.
	Nodes map[string]string
}

// Check replays the log and computes the report. A process is live unless
// the log records its kill or exit.
func Check(entries []Entry) *Report {
	r := &Report{Entries: len(entries), StartsPerKey: map[string]int{}, Running: map[string][]string{},
		Last: map[string]Entry{}, LastRuns: map[string]bool{}, Nodes: map[string]string{}}
	holders := map[string]map[string]bool{} // key → holder (proc/worker) set
	gone := map[string]bool{}               // procs killed or exited
	expected := map[string]bool{}           // acknowledged and not stopped
	stopped := map[string]bool{}            // acknowledged as stopped
	pendingKill := map[string]int64{}       // key → ms of the kill that left it without holder
	killOf := map[string]int{}              // key → index in r.PerKill
	frozen := map[string]map[string]bool{}  // proc → keys it held when frozen
	thawed := map[string]int64{}            // proc → ms of SIGCONT
	open := map[string]*Overlap{}
	type hostage struct {
		proc string
		ms   int64 // the freeze
	}
	hostages := map[string]hostage{} // key → the frozen process holding it
	procOf := func(h string) string { p, _, _ := strings.Cut(h, "/"); return p }

	settle := func(key string, ms int64) {
		if o := open[key]; o != nil && len(holders[key]) <= 1 {
			o.To = time.UnixMilli(ms)
			r.Overlaps = append(r.Overlaps, *o)
			delete(open, key)
		}
	}
	remove := func(key, holder string, ms int64) {
		delete(holders[key], holder)
		if len(holders[key]) == 0 {
			delete(holders, key)
		}
		settle(key, ms)
	}
	dropProc := func(proc string, ms int64, kill bool) {
		gone[proc] = true
		for key, hs := range holders {
			for h := range hs {
				if procOf(h) != proc {
					continue
				}
				remove(key, h, ms)
				if kill && len(holders[key]) == 0 && !stopped[key] {
					pendingKill[key] = ms
					killOf[key] = len(r.PerKill) - 1
				}
				if !kill {
					r.ExitedHolding = append(r.ExitedHolding, key)
				}
			}
		}
	}
	for _, e := range entries {
		r.End = e.Time()
		holder := e.Proc + "/" + e.Worker
		switch e.Event {
		case EvStart:
			r.Starts++
			r.StartsPerKey[e.Key]++
			r.Last[e.Key] = e
			if gone[e.Proc] {
				continue // a late write of a killed process
			}
			if h, ok := hostages[e.Key]; ok && h.proc != e.Proc {
				r.PauseRecoveries = append(r.PauseRecoveries, time.Duration(e.Ms-h.ms)*time.Millisecond)
				delete(hostages, e.Key)
			}
			if t, ok := pendingKill[e.Key]; ok {
				d := time.Duration(e.Ms-t) * time.Millisecond
				r.Recoveries = append(r.Recoveries, d)
				ks := &r.PerKill[killOf[e.Key]]
				if ks.Jobs == 0 || d < ks.First {
					ks.First = d
				}
				ks.Last = max(ks.Last, d)
				ks.Jobs++
				delete(pendingKill, e.Key)
			}
			if holders[e.Key] == nil {
				holders[e.Key] = map[string]bool{}
			}
			holders[e.Key][holder] = true
			if n := len(holders[e.Key]); n > 1 {
				o := open[e.Key]
				if o == nil {
					o = &Overlap{Key: e.Key, From: e.Time()}
					open[e.Key] = o
				}
				o.Holders = max(o.Holders, n)
				for h := range holders[e.Key] {
					if p := procOf(h); !slices.Contains(o.Procs, p) {
						o.Procs = append(o.Procs, p)
					}
				}
			}
		case EvStop:
			r.Stops++
			// A stale copy's stop, while another run of the key goes on,
			// is not the key's last word: that run's start stays it.
			others := len(holders[e.Key])
			if holders[e.Key][holder] {
				others--
			}
			if last := r.Last[e.Key]; others == 0 || last.Proc+"/"+last.Worker == holder {
				r.Last[e.Key] = e
			}
			if holders[e.Key][holder] {
				if fk := frozen[e.Proc]; fk != nil && fk[e.Key] && thawed[e.Proc] > 0 {
					r.StaleAfterThaw = append(r.StaleAfterThaw, time.Duration(e.Ms-thawed[e.Proc])*time.Millisecond)
					delete(fk, e.Key)
				}
				remove(e.Key, holder, e.Ms)
			}
		case EvDispatch:
			r.Dispatched++
			expected[e.Key] = true
			delete(stopped, e.Key)
		case EvStopJob:
			r.StoppedJob++
			delete(expected, e.Key)
			delete(pendingKill, e.Key)
			delete(hostages, e.Key)
			stopped[e.Key] = true
		case EvUnknown:
			delete(expected, e.Key)
			delete(stopped, e.Key)
			delete(pendingKill, e.Key)
		case EvKill:
			r.Kills++
			r.PerKill = append(r.PerKill, KillStat{Proc: e.Proc})
			dropProc(e.Proc, e.Ms, true)
		case EvExit:
			dropProc(e.Proc, e.Ms, false)
		case EvJoin:
			r.Nodes[e.Key] = e.Proc
		case EvFreeze:
			r.Freezes++
			fk := map[string]bool{}
			for key, hs := range holders {
				for h := range hs {
					if procOf(h) == e.Proc {
						fk[key] = true
						if _, held := hostages[key]; !held && !stopped[key] {
							hostages[key] = hostage{proc: e.Proc, ms: e.Ms}
						}
					}
				}
			}
			frozen[e.Proc] = fk
			delete(thawed, e.Proc)
		case EvThaw:
			thawed[e.Proc] = e.Ms
			for key, h := range hostages {
				if h.proc == e.Proc {
					r.UnmovedAtThaw = append(r.UnmovedAtThaw, key)
					delete(hostages, key)
				}
			}
		}
	}
	for key, e := range r.Last {
		r.LastRuns[key] = e.Event == EvStart && !gone[e.Proc]
	}
	for _, o := range open {
		r.Overlaps = append(r.Overlaps, *o)
	}
	for key := range pendingKill {
		r.Unrecovered = append(r.Unrecovered, key)
	}
	for key, hs := range holders {
		for h := range hs {
			r.Running[key] = append(r.Running[key], h)
		}
		if len(hs) > 1 {
			r.Duplicates = append(r.Duplicates, key)
		}
		if stopped[key] {
			r.Zombies = append(r.Zombies, key)
		}
	}
	for key := range expected {
		if len(holders[key]) == 0 {
			r.Lost = append(r.Lost, key)
		}
	}
	sort.Strings(r.Unrecovered)
	sort.Strings(r.Duplicates)
	sort.Strings(r.Zombies)
	sort.Strings(r.Lost)
	sort.Strings(r.ExitedHolding)
	sort.Strings(r.UnmovedAtThaw)
	return r
}

// AtRest returns what violates the invariants at rest: lost jobs,
// duplicates and zombies; nil when the pool is consistent.
func (r *Report) AtRest() error {
	var b strings.Builder
	if len(r.Lost) > 0 {
		fmt.Fprintf(&b, "%d acknowledged jobs not running (lost): %s; ", len(r.Lost), head(r.Lost))
	}
	if len(r.Duplicates) > 0 {
		fmt.Fprintf(&b, "%d jobs running on more than one worker: %s; ", len(r.Duplicates), head(r.Duplicates))
	}
	if len(r.Zombies) > 0 {
		fmt.Fprintf(&b, "%d stopped jobs still running: %s; ", len(r.Zombies), head(r.Zombies))
	}
	if b.Len() == 0 {
		return nil
	}
	return fmt.Errorf("chaos: %s", strings.TrimSuffix(b.String(), "; "))
}

func head(keys []string) string {
	if len(keys) > 5 {
		return strings.Join(keys[:5], ", ") + ", ..."
	}
	return strings.Join(keys, ", ")
}

// MovedMoreThanOnce counts keys started three times or more (moved twice
// or more).
func (r *Report) MovedMoreThanOnce() int {
	n := 0
	for _, c := range r.StartsPerKey {
		if c > 2 {
			n++
		}
	}
	return n
}

// Percentile returns the p-th percentile (0 < p <= 100) of ds, or 0.
func Percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// MaxOverlap returns the longest overlap.
func (r *Report) MaxOverlap() time.Duration {
	var m time.Duration
	for _, o := range r.Overlaps {
		m = max(m, o.Duration(r.End))
	}
	return m
}

// Summary is a human-readable digest of the report.
func (r *Report) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "log entries %d, dispatched %d, stopped %d, starts %d, stops %d, kills %d, freezes %d\n",
		r.Entries, r.Dispatched, r.StoppedJob, r.Starts, r.Stops, r.Kills, r.Freezes)
	fmt.Fprintf(&b, "recoveries %d: p50 %v p99 %v max %v; unrecovered %d\n", len(r.Recoveries),
		Percentile(r.Recoveries, 50), Percentile(r.Recoveries, 99), Percentile(r.Recoveries, 100), len(r.Unrecovered))
	for _, k := range r.PerKill {
		fmt.Fprintf(&b, "  kill of %s: %d jobs restarted %v to %v after it\n", k.Proc, k.Jobs, k.First, k.Last)
	}
	if r.Freezes > 0 {
		fmt.Fprintf(&b, "pause recoveries %d: p50 %v p99 %v max %v; not moved by the thaw %d\n", len(r.PauseRecoveries),
			Percentile(r.PauseRecoveries, 50), Percentile(r.PauseRecoveries, 99), Percentile(r.PauseRecoveries, 100), len(r.UnmovedAtThaw))
	}
	fmt.Fprintf(&b, "double running: %d overlaps, max %v; stale copy stopped after SIGCONT: n=%d p50 %v max %v\n",
		len(r.Overlaps), r.MaxOverlap(), len(r.StaleAfterThaw), Percentile(r.StaleAfterThaw, 50), Percentile(r.StaleAfterThaw, 100))
	fmt.Fprintf(&b, "at rest: %d running, %d lost, %d duplicated, %d zombies; moved more than once %d; left running on exit %d",
		len(r.Running), len(r.Lost), len(r.Duplicates), len(r.Zombies), r.MovedMoreThanOnce(), len(r.ExitedHolding))
	return b.String()
}
