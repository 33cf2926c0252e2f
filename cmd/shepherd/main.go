// Command shepherd is the operators' tool for shepherd pools and queues: a
// demo, status views, thin wrappers over the pool and queue APIs, a web
// dashboard and benchmarks. Its commands are listed in one place, in
// root.go; each group of commands has its own file.
//
// Exit codes: 0 ok, 1 error, 2 usage. Under -json, an error is one JSON
// object on stderr, {"error": "..."}, with the same exit codes.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/shepherd-go/shepherd/internal/redislog"
)

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

// run runs the command line args and returns the exit code. Help goes to
// stdout; errors, and the usage after a mistake in the command line, to
// stderr.
func run(args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	// An error returned before the command's hooks ran comes from reading
	// the command line: an unknown command, a bad flag or argument.
	started := false
	root.PersistentPreRun = func(*cobra.Command, []string) { started = true }
	root.SetArgs(normalizeArgs(root, args))
	cmd, err := unknownFirst(root, args)
	if err == nil {
		cmd, err = root.ExecuteC()
	}
	if err == nil {
		return exitOK
	}
	var ae *argError
	usage := !started || errors.As(err, &ae)
	code := exitError
	if usage || errors.Is(err, errUsage) {
		code = exitUsage
	}
	switch {
	case wantsJSON(root, cmd, args):
		// One JSON object, for a program reading stderr; the usage is
		// for people, who have -h.
		printJSONError(stderr, fmt.Errorf("%s: %w", cmd.CommandPath(), err))
	case usage:
		fmt.Fprintf(stderr, "%s: %v\n\n%s", cmd.CommandPath(), err, cmd.UsageString())
	default:
		fmt.Fprintf(stderr, "%s: %v\n", cmd.CommandPath(), err)
	}
	return code
}

// unknownFirst finds a mistyped command before cobra reads the flags: a
// word where a command with subcommands (the root, queue, tenants, demo)
// wants one, and names none. Cobra would read the flags first,
// against the command it stopped at, and blame the first flag that command
// lacks ("unknown flag: --queue" for "queus stats -queue q"). It returns the
// command the word was looked for in, and unknownCommand's error (also
// with -h: "queus -h" names the mistake rather than print the root's
// help); nil when the command line names its commands.
func unknownFirst(root *cobra.Command, args []string) (*cobra.Command, error) {
	if len(args) > 0 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) {
		return root, nil // the shell asks what the words so far complete to
	}
	l := readLine(root, args)
	cmd := root
	for _, name := range l.path {
		cmd = subcommand(cmd, name)
	}
	// A command with subcommands takes no arguments (requireSubcommand,
	// noArgs): its first argument is a command it lacks.
	if len(l.args) == 0 || !cmd.HasAvailableSubCommands() {
		return cmd, nil
	}
	return cmd, unknownCommand(cmd, l.args[0])
}

// wantsJSON reports whether the command line asked for -json: cmd's
// parsed flag when cmd has one and cobra read it, else any --json in
// args (a command line cobra could not read, or a command without
// -json).
func wantsJSON(root, cmd *cobra.Command, args []string) bool {
	if f := cmd.Flags().Lookup("json"); f != nil && f.Changed {
		return f.Value.String() == "true"
	}
	for _, a := range readLine(root, args).named {
		name, value, hasValue := strings.Cut(a, "=")
		if name == "--json" {
			on, err := strconv.ParseBool(value)
			return !hasValue || (err == nil && on)
		}
	}
	return false
}

// errUsage marks an error the operator can fix on the command line, found
// once the command runs (a malformed -redis URL, a question not confirmed):
// the command exits with exitUsage.
var errUsage = errors.New("usage")

// argError is a mistake in the command line (a missing flag, an argument
// too many): the command exits with exitUsage and prints its usage.
type argError struct{ msg string }

func (e *argError) Error() string { return e.msg }

// usagef returns an argError.
func usagef(format string, args ...any) error {
	return &argError{msg: fmt.Sprintf(format, args...)}
}

// nodeLogger is the logger of the pool nodes a command joins with: errors
// only, on stderr (a short-lived node's warnings are noise; an error, such
// as a withdrawal of a failed dispatch given up, is not).
func nodeLogger(stderr io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}
