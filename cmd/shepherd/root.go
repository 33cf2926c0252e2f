package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// The groups of commands, as help lists them.
const (
	groupPool  = "pool"
	groupQueue = "queue"
	groupOther = "other"
)

// newRoot returns the shepherd command and every command under it: the
// one place that says what the CLI offers. Each group of commands lives in
// its own file: demo*.go, status.go, pools.go, jobs.go, pool.go and
// pool_delete.go (the pool commands), queue.go, queue_submit.go,
// tenants.go and schedules.go, web.go, bench*.go.
//
// Help goes to stdout, errors to stderr. run sets the root's
// PersistentPreRun; no command sets its own (cobra runs only the nearest).
func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "shepherd",
		Short: "operate shepherd pools and queues on Redis",
		Long: `shepherd operates the pools and queues of github.com/shepherd-go/shepherd:
a demo, what runs where, the pool and queue operations, a web dashboard,
benchmarks.

Flags may come before or after a command's arguments and subcommands, and
-flag is --flag. Exit codes: 0 ok, 1 error, 2 usage.`,
		Args:          cobra.ArbitraryArgs,
		RunE:          requireSubcommand,
		SilenceErrors: true, // run prints errors, and the usage when it helps
		SilenceUsage:  true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddGroup(
		&cobra.Group{ID: groupPool, Title: "Pool commands:"},
		&cobra.Group{ID: groupQueue, Title: "Queue commands:"},
		&cobra.Group{ID: groupOther, Title: "Other commands:"},
	)
	root.AddCommand(
		// pool commands
		statusCmd(), jobsCmd(), dispatchCmd(), notifyCmd(), stopCmd(), shutdownCmd(), poolCmd(),
		// queue commands
		queueCmd(), tenantsCmd(), schedulesCmd(),
		// other commands; cobra adds help and completion
		poolsCmd(), webCmd(), demoCmd(), benchCmd(),
		// hidden: the helper processes that demo queue and bench start
		demoQueueWorkerCmd(), benchWorkerCmd(), benchQueueWorkerCmd(),
	)
	root.SetHelpCommandGroupID(groupOther)
	root.SetCompletionCommandGroupID(groupOther)
	// Cobra adds help and completion when it executes; adding them now
	// (after SetOut, which completion's scripts are written to) lets
	// normalizeArgs see them, and lets completion, like every group, refuse
	// to run without a subcommand.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	subcommand(root, "completion").RunE = requireSubcommand
	return root
}

// requireSubcommand is the RunE of a command that only groups others:
// without a subcommand, or with an unknown one, it is a usage error (cobra
// alone would print the help and exit 0).
func requireSubcommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return usagef("missing command")
	}
	return unknownCommand(cmd, args[0])
}

// unknownCommand is the error for name, which is no subcommand of cmd.
func unknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q", name)
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, which it sets only on its own path
	}
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return usagef("%s", msg)
}

// noArgs refuses positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	switch {
	case len(args) == 0:
		return nil
	case cmd.HasAvailableSubCommands():
		return unknownCommand(cmd, args[0])
	}
	return usagef("unexpected arguments %q", args)
}

// rangeArgs accepts min to max positional arguments (max < 0: any number
// from min); missing says what fewer than min lack.
func rangeArgs(min, max int, missing string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		switch {
		case len(args) < min:
			return usagef("%s", missing)
		case max >= 0 && len(args) > max:
			return usagef("unexpected arguments %q", args[max:])
		}
		return nil
	}
}
