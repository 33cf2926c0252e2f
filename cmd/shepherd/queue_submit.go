package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/queue"
)

// submitFlags are queue submit's own flags: the task's options.
type submitFlags struct {
	file     string
	tenant   string
	priority int
	delay    time.Duration
	dedup    string
	window   time.Duration
	id       string
	wait     bool
}

// queueSubmitCmd is "queue submit": one task, its payload from the
// argument, a file (-file) or stdin ("-"), submitted by a process that
// opens the queue for it and closes it after (shown in stats meanwhile,
// with no workers).
func queueSubmitCmd(o *queueOpts) *cobra.Command {
	var sf submitFlags
	cmd := onQueue(o, "submit --queue NAME [PAYLOAD|-]",
		"submit a task: payload from the argument, -file, or stdin (-); prints its id (-wait: its result)",
		rangeArgs(0, 1, ""), func(ctx context.Context, c *queue.Client, o queueOpts) error {
			return queueSubmit(ctx, c, o, sf)
		})
	fs := cmd.Flags()
	fs.StringVar(&sf.file, "file", "", "read the payload from this `file`")
	fs.StringVar(&sf.tenant, "tenant", "", "the task's `tenant` (registered with tenants set)")
	fs.IntVar(&sf.priority, "priority", 0, fmt.Sprintf("the task's `priority`, 0 to %d (higher first)", queue.MaxPriority))
	fs.DurationVar(&sf.delay, "delay", 0, "start the task after this `duration`")
	fs.StringVar(&sf.dedup, "dedup", "", "a deduplication `key`: a Submit with it within -dedup-window queues nothing and prints the first task's id")
	fs.DurationVar(&sf.window, "dedup-window", time.Hour, "how long -dedup's key is remembered")
	fs.StringVar(&sf.id, "id", "", "the task's `id` (default: a generated one)")
	fs.BoolVar(&sf.wait, "wait", false, "wait for the task's outcome (within -timeout) and print its result")
	return cmd
}

func queueSubmit(ctx context.Context, c *queue.Client, o queueOpts, sf submitFlags) error {
	payload, err := submitPayload(o, sf)
	if err != nil {
		return err
	}
	var opts []queue.SubmitOption
	if sf.tenant != "" {
		opts = append(opts, queue.WithTenant(sf.tenant))
	}
	if sf.priority != 0 {
		opts = append(opts, queue.WithPriority(sf.priority))
	}
	if sf.delay != 0 {
		opts = append(opts, queue.WithDelay(sf.delay))
	}
	if sf.dedup != "" {
		opts = append(opts, queue.WithDedup(sf.dedup, sf.window))
	}
	if sf.id != "" {
		opts = append(opts, queue.WithTaskID(sf.id))
	}
	q, err := queue.Open(ctx, o.rdb, c.Name(), queue.WithLogger(nodeLogger(o.stderr)))
	if err != nil {
		return err
	}
	defer q.Close(context.WithoutCancel(ctx))
	f, err := q.Submit(ctx, payload, opts...)
	if errors.Is(err, queue.ErrInvalidOption) || errors.Is(err, queue.ErrPayloadTooLarge) {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if err != nil {
		return err
	}
	out := struct {
		ID        string `json:"id"`
		Duplicate bool   `json:"duplicate,omitempty"`
		Result    []byte `json:"result,omitempty"`
	}{ID: f.ID(), Duplicate: f.Duplicate()}
	if sf.wait {
		if out.Result, err = f.Wait(ctx); err != nil {
			return fmt.Errorf("task %s: %w", f.ID(), err)
		}
	}
	if o.json {
		return printJSON(o.stdout, out)
	}
	if out.Duplicate {
		fmt.Fprintf(o.stdout, "%s (a duplicate: the task of -dedup %q)\n", out.ID, sf.dedup)
	} else {
		fmt.Fprintln(o.stdout, out.ID)
	}
	if sf.wait {
		fmt.Fprintf(o.stdout, "%s\n", out.Result)
	}
	return nil
}

// submitPayload reads the payload: the argument, -file, or stdin when the
// argument is "-"; none is an empty payload.
func submitPayload(o queueOpts, sf submitFlags) ([]byte, error) {
	arg := ""
	if len(o.ids) == 1 {
		arg = o.ids[0]
	}
	switch {
	case sf.file != "" && len(o.ids) == 1:
		return nil, usagef("give the payload as an argument or with -file, not both")
	case sf.file != "":
		b, err := os.ReadFile(sf.file)
		if err != nil {
			return nil, fmt.Errorf("%w: -file: %w", errUsage, err)
		}
		return b, nil
	case arg == "-":
		return io.ReadAll(stdin)
	}
	return []byte(arg), nil
}

// queueDeleteCmd is "queue delete".
func queueDeleteCmd(o *queueOpts) *cobra.Command {
	cmd := onQueue(o, "delete --queue NAME",
		"delete the queue and everything in it (asks for confirmation; refused while processes have it open, unless -force)",
		noArgs, queueDelete)
	cmd.Flags().BoolVar(&o.force, "force", false, "delete even while processes have the queue open")
	return cmd
}

// queueDelete deletes the queue (queue.Client.Delete), after a
// confirmation unless -yes; refused while processes have it open unless
// -force.
func queueDelete(ctx context.Context, c *queue.Client, o queueOpts) error {
	if !confirmed(o, fmt.Sprintf("Delete queue %q: every task, result, dead letter, tenant and schedule?", c.Name())) {
		return fmt.Errorf("%w: not confirmed", errUsage)
	}
	var opts []queue.DeleteOption
	if o.force {
		opts = append(opts, queue.DeleteEvenIfLive())
	}
	n, err := c.Delete(ctx, opts...)
	if errors.Is(err, queue.ErrInUse) {
		return fmt.Errorf("%w; -force deletes it anyway", err)
	}
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(o.stdout, struct {
			Deleted int `json:"deleted_keys"`
		}{n})
	}
	fmt.Fprintf(o.stdout, "queue %s deleted (%d keys)\n", c.Name(), n)
	return nil
}
