package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/shepherd-go/shepherd/internal/humanize"
	"github.com/shepherd-go/shepherd/queue"
)

// queueInspect prints one task, read with queue.Client.Inspect: with
// -json, the TaskInfo in the CLI's JSON style (payload and result in
// base64, as encoding/json writes bytes).
func queueInspect(ctx context.Context, c *queue.Client, o queueOpts) error {
	t, err := c.Inspect(ctx, o.ids[0])
	if err != nil {
		return err // names the id; errors.Is ErrTaskNotFound for an unknown one
	}
	if o.json {
		return printJSON(o.stdout, t)
	}
	at := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(timeMillis)
	}
	timeout := "-"
	if t.Timeout > 0 {
		timeout = humanize.Duration(t.Timeout)
	}
	tw := tabwriter.NewWriter(o.stdout, 2, 4, 2, ' ', 0)
	for _, row := range [][2]string{
		{"id", t.ID},
		{"state", string(t.State)},
		{"tenant", or(t.Tenant, "-")},
		{"priority", fmt.Sprint(t.Priority)},
		{"dedup key", or(t.DedupKey, "-")},
		{"attempt", attemptText(t)},
		{"timeout", timeout},
		{"process", or(t.Process, "-")},
		{"submitted", at(t.Submitted)},
		{"due", at(t.Due)},
		{"finished", at(t.Finished)},
		{"progress", progressText(t.Progress, at)},
		{"last retry later", or(t.LastLater, "-")},
		{"payload", showBytes(t.Payload)},
		{"result", showBytes(t.Result)},
		{"errors", fmt.Sprint(len(t.Errors))},
	} {
		fmt.Fprintf(tw, "%s:\t%s\n", row[0], row[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, e := range t.Errors {
		fmt.Fprintf(o.stdout, "  attempt %d at %s: %s\n", e.Attempt, at(e.At), e.Err)
		if e.Stack != "" {
			for _, l := range strings.Split(strings.TrimRight(e.Stack, "\n"), "\n") {
				fmt.Fprintf(o.stdout, "    %s\n", l)
			}
		}
	}
	return nil
}

// progressText renders what the task's handler last reported
// (Task.Progress): "40 \"page 4 of 10\" (attempt 1, at TIME)", or "-".
func progressText(p *queue.Progress, at func(time.Time) string) string {
	if p == nil {
		return "-"
	}
	s := strconv.FormatFloat(p.Value, 'g', -1, 64)
	if p.Message != "" {
		s += fmt.Sprintf(" %q", p.Message)
	}
	return s + fmt.Sprintf(" (attempt %d, at %s)", p.Attempt, at(p.At))
}

// showBytes renders a payload or result for people: its size, and its
// text when it is short, printable UTF-8.
func showBytes(b []byte) string {
	if b == nil {
		return "-"
	}
	s := fmt.Sprintf("%d bytes", len(b))
	if len(b) <= 200 && utf8.Valid(b) && !strings.ContainsFunc(string(b), func(r rune) bool { return r < ' ' && r != '\t' }) {
		s += fmt.Sprintf(" %q", b)
	}
	return s
}

// attemptText is a task's attempts, "1 of 3", with ", permanent failure"
// for a dead letter of queue.Permanent: it did not use its attempts up.
func attemptText(t queue.TaskInfo) string {
	s := fmt.Sprintf("%d of %d", t.Attempt, t.MaxAttempts)
	if t.Permanent {
		s += ", permanent failure"
	}
	return s
}
