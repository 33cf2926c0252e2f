package main

import (
	"context"
	"fmt"
	"strconv"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/queue"
)

// tenantsCmd is "shepherd tenants": a queue's tenants, through a
// queue.Client as the queue commands.
func tenantsCmd() *cobra.Command {
	o := &queueOpts{state: string(queue.StateWaiting), limit: 100}
	cmd := &cobra.Command{
		Use:     "tenants",
		Short:   "a queue's tenants: ls, set ID CAPACITY, rm ID, untenanted CAPACITY, pause ID, resume ID, rate ID [RATE]",
		GroupID: groupQueue,
		Args:    cobra.ArbitraryArgs,
		RunE:    requireSubcommand,
	}
	o.register(cmd.PersistentFlags())
	cmd.AddCommand(
		onQueue(o, "ls --queue NAME", "list the tenants: capacity, load, waiting, unfinished, rate, paused", noArgs, tenantsList),
		onQueue(o, "set --queue NAME ID CAPACITY", "register a tenant, or change its capacity (≥ 0; 0 holds its tasks)",
			func(cmd *cobra.Command, args []string) error {
				if err := rangeArgs(2, 2, "want a tenant id and a capacity")(cmd, args); err != nil {
					return err
				}
				_, err := parseCapacity(args[1], false)
				return err
			}, tenantsSet),
		onQueue(o, "rm --queue NAME ID...", "remove tenants: new work is refused, unfinished tasks still run",
			rangeArgs(1, -1, "missing tenant id"), tenantsRemove),
		onQueue(o, "untenanted --queue NAME CAPACITY|none", "cap the tasks without a tenant (none: no cap)",
			func(cmd *cobra.Command, args []string) error {
				if err := rangeArgs(1, 1, "want a capacity, or none")(cmd, args); err != nil {
					return err
				}
				_, err := parseCapacity(args[0], true)
				return err
			}, tenantsUntenanted),
		onQueue(o, "pause --queue NAME ID...", "pause tenants: their tasks in flight finish, none starts until resume",
			rangeArgs(1, -1, "missing tenant id"), tenantsPause),
		onQueue(o, "resume --queue NAME ID...", "resume paused tenants", rangeArgs(1, -1, "missing tenant id"), tenantsResume),
		onQueue(o, "rate --queue NAME ID [RATE]", "show a tenant's rate limit, or set it: N/DURATION[+BURST] (500/1s), none removes it",
			rateArgs(1, "missing tenant id"), tenantsRate),
	)
	return cmd
}

// parseCapacity reads a tenant capacity: a number ≥ 0, or with orNone
// "none", which is -1.
func parseCapacity(s string, orNone bool) (int, error) {
	if orNone && s == "none" {
		return -1, nil
	}
	n, err := strconv.Atoi(s)
	switch {
	case err != nil && orNone:
		return 0, usagef("capacity %q is neither a number nor none", s)
	case err != nil:
		return 0, usagef("capacity %q is not a number", s)
	case n < 0 && orNone:
		return 0, usagef("capacity must be ≥ 0 (or none for no cap), got %d", n)
	case n < 0:
		return 0, usagef("capacity must be ≥ 0, got %d", n)
	}
	return n, nil
}

func tenantsList(ctx context.Context, c *queue.Client, o queueOpts) error {
	tenants, err := c.Tenants(ctx)
	if err != nil {
		return err
	}
	if o.json {
		return printJSON(o.stdout, tenants)
	}
	ucap, uload, err := c.Untenanted(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(o.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tCAPACITY\tLOAD\tWAITING\tUNFINISHED\tRATE\tPAUSED")
	if ucap >= 0 {
		fmt.Fprintf(tw, "(untenanted)\t%d\t%d\t-\t-\t-\t-\n", ucap, uload)
	}
	for _, t := range tenants {
		id := t.ID
		if t.Removed {
			id += " (removed)"
		}
		rate, paused := "-", "-"
		if !t.Rate.IsZero() {
			rate = rateText(t.Rate)
		}
		if t.Paused {
			paused = "paused"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", id, t.Capacity, t.Load, t.Waiting, t.Unfinished, rate, paused)
	}
	return tw.Flush()
}

func tenantsSet(ctx context.Context, c *queue.Client, o queueOpts) error {
	capacity, err := parseCapacity(o.ids[1], false)
	if err != nil {
		return err
	}
	if err := c.SetTenant(ctx, o.ids[0], capacity); err != nil {
		return err
	}
	if o.json {
		return printJSON(o.stdout, struct {
			Tenant   string `json:"tenant"`
			Capacity int    `json:"capacity"`
		}{o.ids[0], capacity})
	}
	fmt.Fprintf(o.stdout, "%s: capacity %d\n", o.ids[0], capacity)
	return nil
}

func tenantsRemove(ctx context.Context, c *queue.Client, o queueOpts) error {
	return eachID(o, "removed (its unfinished tasks still run)", func(id string) error { return c.RemoveTenant(ctx, id) })
}

func tenantsUntenanted(ctx context.Context, c *queue.Client, o queueOpts) error {
	capacity, err := parseCapacity(o.ids[0], true)
	if err != nil {
		return err
	}
	if err := c.SetUntenantedCapacity(ctx, capacity); err != nil {
		return err
	}
	if o.json {
		var v *int // null: no cap
		if capacity >= 0 {
			v = &capacity
		}
		return printJSON(o.stdout, struct {
			Capacity *int `json:"untenanted_capacity"`
		}{v})
	}
	if capacity < 0 {
		fmt.Fprintln(o.stdout, "untenanted tasks: no cap")
	} else {
		fmt.Fprintf(o.stdout, "untenanted tasks: capacity %d\n", capacity)
	}
	return nil
}
