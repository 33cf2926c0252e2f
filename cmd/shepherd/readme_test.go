package main

import (
	"io"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// readme is the repository's README.md.
func readme(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	return string(b)
}

// README's table of commands lists every command and subcommand the
// binary has (completion's shells in one row).
func TestReadmeListsEveryCommand(t *testing.T) {
	t.Parallel()
	doc := readme(t)
	var walk func(c *cobra.Command, path string)
	walk = func(c *cobra.Command, path string) {
		for _, sub := range c.Commands() {
			if sub.Hidden {
				continue
			}
			p := strings.TrimSpace(path + " " + sub.Name())
			assert.Contains(t, doc, "| `"+p, "README's table of commands has no row for %q", p)
			if sub.Name() != "completion" {
				walk(sub, p)
			}
		}
	}
	walk(newRoot(io.Discard, io.Discard), "")
}

// Every Go snippet of README names its imports (or is a whole program).
func TestReadmeSnippetsHaveImports(t *testing.T) {
	t.Parallel()
	snippets := regexp.MustCompile("(?s)```go\n(.*?)```").FindAllStringSubmatch(readme(t), -1)
	require.NotEmpty(t, snippets)
	for _, m := range snippets {
		body := m[1]
		first, _, _ := strings.Cut(body, "\n")
		assert.True(t, strings.HasPrefix(body, "import ") || strings.HasPrefix(body, "package main\n\nimport ("),
			"a snippet without its imports: %q", first)
	}
}

// README's one test command is the one .ci/run runs, and README names
// .ci/run for a fresh machine.
func TestReadmeTestCommandIsCIs(t *testing.T) {
	t.Parallel()
	doc := readme(t)
	ci, err := os.ReadFile("../../.ci/run")
	require.NoError(t, err)
	const cmd = "go test -race -count=1 ./..."
	assert.Contains(t, string(ci), "\n"+cmd+"\n")
	assert.Contains(t, doc, "\n"+cmd+" ")
	assert.Contains(t, doc, "\nbash .ci/run ")
}
