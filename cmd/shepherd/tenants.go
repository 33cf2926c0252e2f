package main

import (
	"context"
	"encoding/json"
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
		Short:   "a queue's tenants: ls, set ID CAPACITY, rm ID, untenanted CAPACITY",
		GroupID: groupQueue,
		Args:    cobra.ArbitraryArgs,
		RunE:    requireSubcommand,
	}
	o.register(cmd.PersistentFlags())
	cmd.AddCommand(
		onQueue(o, "ls --queue NAME", "list the tenants: capacity, load, waiting, unfinished", noArgs, tenantsList),
		onQueue(o, "set --queue NAME ID CAPACITY", "register a tenant, or change its capacity (0 holds its tasks)",
			rangeArgs(2, 2, "want a tenant id and a capacity"), tenantsSet),
		onQueue(o, "rm --queue NAME ID...", "remove tenants: new work is refused, unfinished tasks still run",
			rangeArgs(1, -1, "missing tenant id"), tenantsRemove),
		onQueue(o, "untenanted --queue NAME CAPACITY|none", "cap the tasks without a tenant (none: no cap)",
			rangeArgs(1, 1, "want a capacity, or none"), tenantsUntenanted),
	)
	return cmd
}

func tenantsList(ctx context.Context, c *queue.Client, o queueOpts) error {
	tenants, err := c.Tenants(ctx)
	if err != nil {
		return err
	}
	if o.json {
		if tenants == nil {
			tenants = []queue.TenantInfo{}
		}
		return json.NewEncoder(o.stdout).Encode(tenants)
	}
	ucap, uload, err := c.Untenanted(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(o.stdout, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tCAPACITY\tLOAD\tWAITING\tUNFINISHED")
	if ucap >= 0 {
		fmt.Fprintf(tw, "(untenanted)\t%d\t%d\t-\t-\n", ucap, uload)
	}
	for _, t := range tenants {
		id := t.ID
		if t.Removed {
			id += " (removed)"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\n", id, t.Capacity, t.Load, t.Waiting, t.Unfinished)
	}
	return tw.Flush()
}

func tenantsSet(ctx context.Context, c *queue.Client, o queueOpts) error {
	capacity, err := strconv.Atoi(o.ids[1])
	if err != nil {
		return fmt.Errorf("%w: capacity %q is not a number", errUsage, o.ids[1])
	}
	if err := c.SetTenant(ctx, o.ids[0], capacity); err != nil {
		return err
	}
	fmt.Fprintf(o.stdout, "%s: capacity %d\n", o.ids[0], capacity)
	return nil
}

func tenantsRemove(ctx context.Context, c *queue.Client, o queueOpts) error {
	return eachID(o, "removed (its unfinished tasks still run)", func(id string) error { return c.RemoveTenant(ctx, id) })
}

func tenantsUntenanted(ctx context.Context, c *queue.Client, o queueOpts) error {
	capacity := -1
	if o.ids[0] != "none" {
		var err error
		if capacity, err = strconv.Atoi(o.ids[0]); err != nil {
			return fmt.Errorf("%w: capacity %q is neither a number nor none", errUsage, o.ids[0])
		}
	}
	if err := c.SetUntenantedCapacity(ctx, capacity); err != nil {
		return err
	}
	if capacity < 0 {
		fmt.Fprintln(o.stdout, "untenanted tasks: no cap")
	} else {
		fmt.Fprintf(o.stdout, "untenanted tasks: capacity %d\n", capacity)
	}
	return nil
}
