package docstest

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// root is the module's root, from this package's directory.
const root = "../.."

// block is one ```go block of a Markdown file.
type block struct {
	file  string // relative to root: "docs/queue.md"
	line  int    // the line of its first line of code, from 1
	code  string
	quote string // the file it quotes, from a "<!-- quote PATH -->" line just above its fence
}

func (b block) String() string { return fmt.Sprintf("%s:%d", b.file, b.line) }

var quoteLine = regexp.MustCompile(`^<!-- quote (\S+) -->$`)

// goBlocks returns the ```go blocks of the Markdown file at root/name.
func goBlocks(t *testing.T, name string) []block {
	t.Helper()
	f, err := os.Open(filepath.Join(root, name))
	require.NoError(t, err)
	defer f.Close()
	var (
		out  []block
		cur  *block
		prev string
		n    int
	)
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur != nil && line == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += line + "\n"
		case line == "```go":
			cur = &block{file: name, line: n + 1}
			if m := quoteLine.FindStringSubmatch(prev); m != nil {
				cur.quote = m[1]
			}
		}
		prev = line
	}
	require.NoError(t, sc.Err())
	require.Nil(t, cur, "%s: a ```go block is not closed", name)
	return out
}

// firstCode is the first line of code that is neither blank nor a
// comment.
func firstCode(code string) string {
	for line := range strings.Lines(code) {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "//") {
			return line
		}
	}
	return ""
}

// goTool is the go command: the one in $PATH, else the one of the
// toolchain that built this test.
func goTool(t *testing.T) string {
	t.Helper()
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	_, err := os.Stat(p)
	require.NoError(t, err, "no go command in $PATH nor in GOROOT")
	return p
}

// markdown lists the files whose Go blocks must compile.
func markdown(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	require.NoError(t, err)
	files := []string{"README.md", "CHANGELOG.md"}
	for _, d := range docs {
		files = append(files, filepath.Join("docs", filepath.Base(d)))
	}
	return files
}

// Every ```go block of README.md, CHANGELOG.md and docs/*.md is either a
// whole program (package main) or starts with its imports and holds only
// declarations; each is written as a package of its own in a directory of
// the module whose name starts with "_" (so that ./... never sees it), and
// one `go vet` compiles and vets them all with the module's go.mod. A
// failure names the Markdown file and line (the blocks carry //line
// directives).
func TestDocsGoBlocksCompile(t *testing.T) {
	abs, err := filepath.Abs(root)
	require.NoError(t, err)
	tmp, err := os.MkdirTemp(abs, "_docstest")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })

	var dirs []string
	var all []block
	for _, name := range markdown(t) {
		all = append(all, goBlocks(t, name)...)
	}
	require.NotEmpty(t, all)
	for i, b := range all {
		directive := fmt.Sprintf("//line %s:%d\n", filepath.Join(abs, b.file), b.line)
		var src string
		switch first := firstCode(b.code); {
		case first == "package main":
			src = directive + b.code
		case strings.HasPrefix(first, "import "):
			src = "package snippet\n\n" + directive + b.code
		default:
			t.Errorf("%s: a ```go block must be a whole program (package main) or start with import and hold only declarations", b)
			continue
		}
		dir := filepath.Join(tmp, fmt.Sprintf("b%03d", i))
		require.NoError(t, os.Mkdir(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "snippet.go"), []byte(src), 0o644))
		dirs = append(dirs, "./"+filepath.Join(filepath.Base(tmp), filepath.Base(dir)))
	}
	if len(dirs) == 0 {
		return
	}
	cmd := exec.Command(goTool(t), append([]string{"vet"}, dirs...)...)
	cmd.Dir = abs
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.ReplaceAll(string(out), abs+string(filepath.Separator), "")
		t.Errorf("go vet of the Markdown's Go blocks failed (positions are FILE.md:LINE):\n%s", msg)
	}
}

// README quotes the example programs whole, and each quote (a ```go block
// just below a "<!-- quote PATH -->" line) equals the file it names.
func TestReadmeQuotesTheExamplePrograms(t *testing.T) {
	quoted := map[string]bool{}
	for _, name := range markdown(t) {
		for _, b := range goBlocks(t, name) {
			if b.quote == "" {
				continue
			}
			if name == "README.md" {
				quoted[b.quote] = true
			}
			src, err := os.ReadFile(filepath.Join(root, b.quote))
			if !assert.NoError(t, err, "%s quotes a file that does not exist", b) {
				continue
			}
			if !bytes.Equal(src, []byte(b.code)) {
				t.Errorf("%s quotes %s but differs from it: copy the file into the block", b, b.quote)
			}
		}
	}
	for _, want := range []string{"examples/queue/main.go", "examples/pool/main.go"} {
		assert.True(t, quoted[want], "README does not quote %s", want)
	}
}
