// Command shepherd is the operators' tool for shepherd pools: a demo, a
// status view, thin wrappers over the pool API, and benchmarks.
//
// Exit codes: 0 ok, 1 error, 2 usage.
package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"sort"

	"github.com/shepherd-go/shepherd/internal/redislog"
)

// command is a subcommand: it gets its arguments (without its name) and
// where to write, and returns the exit code.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands holds every subcommand; each registers itself from its own file
// in an init function.
var commands = map[string]command{}

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	// go-redis prints its own complaints (a refused dial while Redis
	// restarts) with the standard log package; the commands report Redis
	// errors themselves, so its lines go to a logger that drops them.
	redislog.Route(slog.New(slog.NewTextHandler(os.Stderr, nil)), slog.LevelDebug)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// nodeLogger is the logger of the pool nodes a command joins with: errors
// only, on stderr (a short-lived node's warnings are noise; an error, such
// as a withdrawal of a failed dispatch given up, is not).
func nodeLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "-help" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	cmd, ok := commands[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "shepherd: unknown command %q\n\n", args[0])
		usage(stderr)
		return exitUsage
	}
	return cmd.run(args[1:], stdout, stderr)
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: shepherd <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
	fmt.Fprintln(w, "\nRun 'shepherd <command> -h' for a command's flags.")
	fmt.Fprintln(w, "Exit codes: 0 ok, 1 error, 2 usage.")
}
