package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/shepherd-go/shepherd/queue"
)

func queueList(ctx context.Context, c *queue.Client, o queueOpts) error {
	state := queue.State(o.state)
	if !slices.Contains(listedStates, state) {
		return fmt.Errorf("%w: -state must be %s, got %q", errUsage, listedStateNames, o.state)
	}
	tasks, err := c.Tasks(ctx, state, 0, o.limit)
	if err != nil {
		return err
	}
	if len(tasks) == 0 && !o.json {
		_, err := fmt.Fprintf(o.stdout, "no task is %s in queue %s\n", state, c.Name())
		return err
	}
	return printTasks(o, tasks)
}

// listedStates are the states queue ls lists (queue.Client.Tasks), as the
// dashboard does; listedStateNames says them.
var listedStates = []queue.State{queue.StateWaiting, queue.StateDelayed, queue.StateRetrying, queue.StateActive,
	queue.StateDone, queue.StateCancelled, queue.StateDead}

const listedStateNames = "waiting, delayed, retry, active, done, cancelled or dead"

func queueDead(ctx context.Context, c *queue.Client, o queueOpts) error {
	tasks, err := c.DeadLetters(ctx, 0, o.limit)
	if err != nil {
		return err
	}
	return printTasks(o, tasks)
}

// taskRow is a task as ls and dead print it.
type taskRow struct {
	ID        string    `json:"id"`
	State     string    `json:"state"`
	Priority  int       `json:"priority"`
	Attempt   int       `json:"attempt"`
	Max       int       `json:"max_attempts"`
	Permanent bool      `json:"permanent,omitempty"` // a dead letter of queue.Permanent
	Process   string    `json:"process,omitempty"`
	Submitted time.Time `json:"submitted"`
	Due       time.Time `json:"due"`
	Finished  time.Time `json:"finished,omitzero"`
	LastError string    `json:"last_error,omitempty"`
	Payload   []byte    `json:"payload,omitempty"`
}

func printTasks(o queueOpts, tasks []queue.TaskInfo) error {
	rows := make([]taskRow, 0, len(tasks))
	for _, t := range tasks {
		r := taskRow{ID: t.ID, State: string(t.State), Priority: t.Priority, Attempt: t.Attempt, Max: t.MaxAttempts, Permanent: t.Permanent, Process: t.Process,
			Submitted: t.Submitted, Due: t.Due, Finished: t.Finished, Payload: t.Payload}
		if n := len(t.Errors); n > 0 {
			r.LastError = t.Errors[n-1].Err
		}
		rows = append(rows, r)
	}
	if o.json {
		return printJSON(o.stdout, rows)
	}
	// Finished tasks (done, cancelled, dead) show when they finished, the
	// others when they are due; to the millisecond.
	when := "DUE"
	if len(rows) > 0 && !rows[0].Finished.IsZero() {
		when = "FINISHED"
	}
	tw := tabwriter.NewWriter(o.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "ID\tSTATE\tPRIORITY\tATTEMPT\t%s\tPROCESS\tLAST ERROR\n", when)
	for _, r := range rows {
		proc := r.Process
		if proc == "" {
			proc = "-"
		}
		at := r.Due
		if when == "FINISHED" {
			at = r.Finished
		}
		attempts := fmt.Sprintf("%d/%d", r.Attempt, r.Max)
		if r.Permanent {
			attempts += " permanent"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", r.ID, r.State, r.Priority, attempts,
			at.Format(timeMillis), proc, firstLine(r.LastError))
	}
	return tw.Flush()
}

// timeMillis is how the CLI prints an instant: RFC 3339, to the
// millisecond.
const timeMillis = "2006-01-02T15:04:05.000Z07:00"

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
