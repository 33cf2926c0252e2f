package main

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// normalizeArgs returns the command line args as cobra should read it.
// Cobra's flags (pflag) read "-queue" as the one-letter flags -q -u -e -u
// -e, and "-1" as the flag -1; the commands were written for Go's flag
// package, where both are what an operator means. So:
//
//   - "-name" and "-name=value" become "--name" and "--name=value": the
//     commands have no one-letter flag but -h, so a single dash before two
//     or more characters always means a long flag.
//   - The subcommands come first, then the flags, then the positional
//     arguments, behind a "--" when one of them begins with "-" (the
//     capacity in "tenants set acme -1", or an argument after the
//     operator's own "--"), which pflag would read as a flag.
//
// It walks the command tree to know which words are subcommands and which
// flags take a value (the value of "-payload -x" is "-x"). A completion
// request (cobra's hidden __complete command) keeps its words in place, so
// that cobra knows what the last one completes. The result is never nil:
// given nil, cobra would read os.Args.
func normalizeArgs(root *cobra.Command, args []string) []string {
	if len(args) > 1 && (args[0] == cobra.ShellCompRequestCmd || args[0] == cobra.ShellCompNoDescRequestCmd) {
		last := len(args) - 1
		words := readLine(root, args[1:last]).words
		return append(append([]string{args[0]}, words...), args[last])
	}
	l := readLine(root, args)
	out := append(append([]string{}, l.path...), l.flags...)
	for _, a := range l.args {
		if strings.HasPrefix(a, "-") && a != "-" {
			out = append(out, "--")
			break
		}
	}
	return append(out, l.args...)
}

// line is a command line read by readLine.
type line struct {
	path  []string // the subcommands, in order
	flags []string // the flags, long ones with "--", each followed by its value if separate
	named []string // the flags alone, without their separate values
	args  []string // the positional arguments
	words []string // all of them in the order given, long flags with "--"
}

// readLine sorts args into subcommands, flags and positional arguments,
// as cobra does: a subcommand is the first positional word at its level
// that names one; after "--" every word is positional.
func readLine(root *cobra.Command, args []string) line {
	var l line
	cmd := root
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			l.args = append(l.args, args[i+1:]...)
			l.words = append(l.words, args[i:]...)
			return l
		case isFlag(a):
			name, _, hasValue := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
			if !strings.HasPrefix(a, "--") && len(name) > 1 {
				a = "-" + a
			}
			l.flags = append(l.flags, a)
			l.named = append(l.named, a)
			l.words = append(l.words, a)
			if f := lookupFlag(cmd, name); f != nil && f.NoOptDefVal == "" && !hasValue && i+1 < len(args) {
				i++
				l.flags = append(l.flags, args[i])
				l.words = append(l.words, args[i])
			}
		case len(l.args) == 0 && subcommand(cmd, a) != nil:
			cmd = subcommand(cmd, a)
			l.path = append(l.path, a)
			l.words = append(l.words, a)
		default:
			l.args = append(l.args, a)
			l.words = append(l.words, a)
		}
	}
	return l
}

// isFlag reports whether a is meant as a flag: "-" followed by anything
// but a digit (a negative number is an argument).
func isFlag(a string) bool {
	return len(a) > 1 && a[0] == '-' && (a[1] < '0' || a[1] > '9')
}

// lookupFlag returns cmd's flag name (one letter: its shorthand), its own
// or inherited, or nil.
func lookupFlag(cmd *cobra.Command, name string) *pflag.Flag {
	for _, fs := range []*pflag.FlagSet{cmd.LocalFlags(), cmd.InheritedFlags()} {
		var f *pflag.Flag
		switch len(name) {
		case 0:
		case 1:
			f = fs.ShorthandLookup(name)
		default:
			f = fs.Lookup(name)
		}
		if f != nil {
			return f
		}
	}
	return nil
}

// subcommand returns cmd's subcommand called name, or nil.
func subcommand(cmd *cobra.Command, name string) *cobra.Command {
	for _, c := range cmd.Commands() {
		if c.Name() == name || c.HasAlias(name) {
			return c
		}
	}
	return nil
}
