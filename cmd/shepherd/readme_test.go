package main

import (
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readDoc returns a Markdown file of the repository, by its path from
// the module's root ("README.md", "docs/cli.md").
func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../" + name)
	require.NoError(t, err)
	return string(b)
}

// The CLI guide's table of commands lists every command and subcommand
// the binary has (completion's shells in one row). (The Go blocks of the
// Markdown are compiled by internal/docstest.)
func TestCLIDocListsEveryCommand(t *testing.T) {
	t.Parallel()
	doc := readDoc(t, "docs/cli.md")
	var walk func(c *cobra.Command, path string)
	walk = func(c *cobra.Command, path string) {
		for _, sub := range c.Commands() {
			if sub.Hidden {
				continue
			}
			p := strings.TrimSpace(path + " " + sub.Name())
			assert.Contains(t, doc, "| `"+p, "docs/cli.md's table of commands has no row for %q", p)
			if sub.Name() != "completion" {
				walk(sub, p)
			}
		}
	}
	walk(newRoot(io.Discard, io.Discard), "")
}

// README's one test command is the one .ci/run runs, and README names
// .ci/run for a fresh machine.
func TestReadmeTestCommandIsCIs(t *testing.T) {
	t.Parallel()
	doc := readDoc(t, "README.md")
	ci, err := os.ReadFile("../../.ci/run")
	require.NoError(t, err)
	const cmd = "go test -race -count=1 ./..."
	assert.Contains(t, string(ci), "\n"+cmd+"\n")
	assert.Contains(t, doc, "\n"+cmd+" ")
	assert.Contains(t, doc, "\nbash .ci/run ")
}
