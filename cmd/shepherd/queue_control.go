package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/queue"
)

// The commands that control when a queue's tasks start: pause and resume,
// and rate limits, for the whole queue (queue pause|resume|rate) and for
// one tenant (tenants pause|resume|rate). Each is one call of
// queue.Client; the state is stored with the queue, and queue stats and
// tenants ls show it.

// parseRateArg reads a rate from the command line as queue.ParseRate
// does ("500/1s", "500/1s+25", "none"), as a usage error when malformed
// (ParseRate refuses "0": a capacity of 0 holds a tenant's tasks, and
// "rate 0" must not be read as the opposite).
func parseRateArg(s string) (queue.Rate, error) {
	r, err := queue.ParseRate(s)
	if err != nil {
		return queue.Rate{}, usagef("%v (want N/DURATION like 500/1s, optionally +BURST like 500/1s+25, or none)", err)
	}
	return r, nil
}

// rateArgs returns the positional arguments of a rate command: the
// first n fixed ones (missing says what fewer lack), then an optional
// rate, checked here so that a malformed one is a usage error.
func rateArgs(n int, missing string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := rangeArgs(n, n+1, missing)(cmd, args); err != nil {
			return err
		}
		if len(args) == n+1 {
			_, err := parseRateArg(args[n])
			return err
		}
		return nil
	}
}

// rateText renders a rate for people: "500/1s, burst 10", or "none".
func rateText(r queue.Rate) string {
	if r.IsZero() {
		return "none"
	}
	return fmt.Sprintf("%d/%v, burst %d", r.N, r.Per, r.EffectiveBurst())
}

// queuePause pauses the queue (queue.Client.Pause).
func queuePause(ctx context.Context, c *queue.Client, o queueOpts) error {
	if err := c.Pause(ctx); err != nil {
		return err
	}
	return printPaused(o, c.Name(), true)
}

// queueResume ends the queue's pause (queue.Client.Resume).
func queueResume(ctx context.Context, c *queue.Client, o queueOpts) error {
	if err := c.Resume(ctx); err != nil {
		return err
	}
	return printPaused(o, c.Name(), false)
}

// printPaused says whether the queue is now paused: with -json,
// {"queue", "paused"}.
func printPaused(o queueOpts, name string, paused bool) error {
	if o.json {
		return printJSON(o.stdout, struct {
			Queue  string `json:"queue"`
			Paused bool   `json:"paused"`
		}{name, paused})
	}
	if paused {
		fmt.Fprintf(o.stdout, "queue %s paused: tasks in flight finish, none starts until queue resume\n", name)
	} else {
		fmt.Fprintf(o.stdout, "queue %s resumed\n", name)
	}
	return nil
}

// queueRate shows the queue's rate limit, or sets it when a rate is given
// ("none" removes it).
func queueRate(ctx context.Context, c *queue.Client, o queueOpts) error {
	var r queue.Rate
	if len(o.ids) == 1 {
		var err error
		if r, err = parseRateArg(o.ids[0]); err != nil {
			return err
		}
		if err := c.SetRate(ctx, r); err != nil {
			return err
		}
	} else {
		st, err := c.Stats(ctx)
		if err != nil {
			return err
		}
		r = st.Rate
	}
	if o.json {
		return printJSON(o.stdout, struct {
			Queue string     `json:"queue"`
			Rate  queue.Rate `json:"rate"`
		}{c.Name(), r})
	}
	fmt.Fprintf(o.stdout, "queue %s: rate %s\n", c.Name(), rateText(r))
	return nil
}

// tenantsPause pauses tenants (queue.Client.PauseTenant).
func tenantsPause(ctx context.Context, c *queue.Client, o queueOpts) error {
	return eachID(o, "paused", func(id string) error { return c.PauseTenant(ctx, id) })
}

// tenantsResume ends tenants' pauses (queue.Client.ResumeTenant).
func tenantsResume(ctx context.Context, c *queue.Client, o queueOpts) error {
	return eachID(o, "resumed", func(id string) error { return c.ResumeTenant(ctx, id) })
}

// tenantsRate shows a tenant's rate limit, or sets it when a rate is
// given ("none" removes it).
func tenantsRate(ctx context.Context, c *queue.Client, o queueOpts) error {
	id := o.ids[0]
	var r queue.Rate
	if len(o.ids) == 2 {
		var err error
		if r, err = parseRateArg(o.ids[1]); err != nil {
			return err
		}
		if err := c.SetTenantRate(ctx, id, r); err != nil {
			return err
		}
	} else {
		t, err := findTenant(ctx, c, id)
		if err != nil {
			return err
		}
		r = t.Rate
	}
	if o.json {
		return printJSON(o.stdout, struct {
			Tenant string     `json:"tenant"`
			Rate   queue.Rate `json:"rate"`
		}{id, r})
	}
	fmt.Fprintf(o.stdout, "%s: rate %s\n", id, rateText(r))
	return nil
}

// findTenant returns the tenant id as Tenants lists it (a removed one
// too, while its tasks are unfinished), or an error wrapping
// queue.ErrUnknownTenant.
func findTenant(ctx context.Context, c *queue.Client, id string) (queue.TenantInfo, error) {
	tenants, err := c.Tenants(ctx)
	if err != nil {
		return queue.TenantInfo{}, err
	}
	for _, t := range tenants {
		if t.ID == id {
			return t, nil
		}
	}
	return queue.TenantInfo{}, fmt.Errorf("%w: %q", queue.ErrUnknownTenant, id)
}
