package shepherdtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/shepherd-go/shepherd/queue"
)

// Match selects tasks for RequireTask, RequireTasks and RequireNoTask:
// a task matches a list of Matches when it matches every one.
type Match struct {
	desc string
	ok   func(queue.TaskInfo) bool
}

// String describes the match, as failure messages show it.
func (m Match) String() string { return m.desc }

// Where matches the tasks for which ok returns true; desc describes it in
// failure messages.
func Where(desc string, ok func(queue.TaskInfo) bool) Match { return Match{desc, ok} }

// ID matches the task of id id.
func ID(id string) Match {
	return Where(fmt.Sprintf("id %q", id), func(t queue.TaskInfo) bool { return t.ID == id })
}

// Payload matches the tasks of payload p, byte for byte. The queue keeps
// a payload until its task finishes; AllTasks fills in the payloads of
// the tasks Work ran.
func Payload(p []byte) Match {
	return Where(fmt.Sprintf("payload %q", p), func(t queue.TaskInfo) bool { return bytes.Equal(t.Payload, p) })
}

// PayloadJSON matches the tasks whose payload is JSON equal to v's
// encoding, whatever the order of object keys and the spacing. It panics
// when v cannot be encoded.
func PayloadJSON(v any) Match {
	want, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("shepherdtest: PayloadJSON: %v", err))
	}
	var w any
	_ = json.Unmarshal(want, &w)
	return Where(fmt.Sprintf("JSON payload %s", want), func(t queue.TaskInfo) bool {
		var got any
		return json.Unmarshal(t.Payload, &got) == nil && reflect.DeepEqual(got, w)
	})
}

// Tenant matches the tasks submitted for tenant id (queue.WithTenant);
// Tenant("") those submitted for none.
func Tenant(id string) Match {
	return Where(fmt.Sprintf("tenant %q", id), func(t queue.TaskInfo) bool { return t.Tenant == id })
}

// Priority matches the tasks of priority p (queue.WithPriority; 0 when
// not set).
func Priority(p int) Match {
	return Where(fmt.Sprintf("priority %d", p), func(t queue.TaskInfo) bool { return t.Priority == p })
}

// DedupKey matches the tasks submitted with deduplication key key
// (queue.WithDedup).
func DedupKey(key string) Match {
	return Where(fmt.Sprintf("dedup key %q", key), func(t queue.TaskInfo) bool { return t.DedupKey == key })
}

// MaxAttempts matches the tasks submitted with n as their most attempts
// (queue.WithMaxAttempts; queue.DefaultMaxAttempts when not set).
func MaxAttempts(n int) Match {
	return Where(fmt.Sprintf("max attempts %d", n), func(t queue.TaskInfo) bool { return t.MaxAttempts == n })
}

// Delayed matches the tasks due at least d after they were submitted
// (queue.WithDelay, WithDueAt). A retry moves a task's due time, so a
// task that was retried matches too.
func Delayed(d time.Duration) Match {
	return Where(fmt.Sprintf("delayed by at least %v", d), func(t queue.TaskInfo) bool { return t.Due.Sub(t.Submitted) >= d })
}

// InState matches the tasks in state s: queue.StateDone (with
// queue.TaskInfo.Result), StateDead (with Errors), StateCancelled,
// StateWaiting, StateDelayed, StateRetrying or StateActive.
func InState(s queue.State) Match {
	return Where(fmt.Sprintf("state %s", s), func(t queue.TaskInfo) bool { return t.State == s })
}

// Result matches the done tasks whose result is r.
func Result(r []byte) Match {
	return Where(fmt.Sprintf("result %q", r), func(t queue.TaskInfo) bool {
		return t.State == queue.StateDone && bytes.Equal(t.Result, r)
	})
}

// matching returns the tasks of all that match every m.
func matching(all []queue.TaskInfo, m []Match) []queue.TaskInfo {
	var out []queue.TaskInfo
	for _, t := range all {
		ok := true
		for _, x := range m {
			if !x.ok(t) {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, t)
		}
	}
	return out
}

// RequireTask fails tb unless exactly one task of the queue (AllTasks)
// matches every m, and returns it. With no m, the queue must hold
// exactly one task.
func (q *Queue) RequireTask(tb testing.TB, m ...Match) queue.TaskInfo {
	tb.Helper()
	return q.RequireTasks(tb, 1, m...)[0]
}

// RequireTasks fails tb unless exactly n tasks of the queue (AllTasks)
// match every m, and returns them, oldest submitted first.
func (q *Queue) RequireTasks(tb testing.TB, n int, m ...Match) []queue.TaskInfo {
	tb.Helper()
	all := q.AllTasks(tb)
	got := matching(all, m)
	if len(got) != n {
		tb.Fatalf("shepherdtest: queue %q: want %d task(s) with %s, found %d\n%s", q.Name(), n, describe(m), len(got), list(all))
	}
	return got
}

// RequireNoTask fails tb when some task of the queue (AllTasks) matches
// every m. With no m, the queue must hold no task.
func (q *Queue) RequireNoTask(tb testing.TB, m ...Match) {
	tb.Helper()
	all := q.AllTasks(tb)
	if got := matching(all, m); len(got) > 0 {
		tb.Fatalf("shepherdtest: queue %q: want no task with %s, found %d\n%s", q.Name(), describe(m), len(got), list(all))
	}
}

func describe(m []Match) string {
	if len(m) == 0 {
		return "anything"
	}
	d := make([]string, len(m))
	for i, x := range m {
		d[i] = x.desc
	}
	return strings.Join(d, ", ")
}

// list shows the queue's tasks in a failure message, at most 20.
func list(all []queue.TaskInfo) string {
	if len(all) == 0 {
		return "the queue holds no task"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "the queue holds %d task(s):", len(all))
	for i, t := range all {
		if i == 20 {
			fmt.Fprintf(&b, "\n  … and %d more", len(all)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %s %s tenant=%q priority=%d dedup=%q attempts=%d/%d payload=%q", t.ID, t.State, t.Tenant, t.Priority, t.DedupKey, t.Attempt, t.MaxAttempts, clip(t.Payload))
		if t.State == queue.StateDone {
			fmt.Fprintf(&b, " result=%q", clip(t.Result))
		}
		if n := len(t.Errors); n > 0 {
			fmt.Fprintf(&b, " last error=%q", t.Errors[n-1].Err)
		}
	}
	return b.String()
}

func clip(p []byte) []byte {
	if len(p) > 60 {
		return append(p[:60:60], "…"...)
	}
	return p
}
