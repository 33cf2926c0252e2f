package internal_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// goFileRef matches a Go file named in prose: "queue/feed.go", "wire.go".
var goFileRef = regexp.MustCompile(`[A-Za-z0-9_][A-Za-z0-9_./-]*\.go\b`)

// TestArchitectureNamesFilesThatExist reads docs/ARCHITECTURE.md and the
// reading guides of pool/doc.go and queue/doc.go, and fails for each Go
// file they name that does not exist, so that a file split, renamed or
// removed cannot leave the docs pointing at nothing. A path with a
// directory is read from the module's root (ARCHITECTURE.md) or the
// package's directory (doc.go); a bare name in ARCHITECTURE.md must be
// some package's file.
func TestArchitectureNamesFilesThatExist(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	bases := map[string]bool{} // every Go file's name, for the bare ones
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && filepath.Ext(path) == ".go" {
			bases[d.Name()] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []struct {
		file string // relative to root
		dir  string // where the names it gives with no directory live ("": any package)
	}{
		{"docs/ARCHITECTURE.md", ""},
		{"pool/doc.go", "pool"},
		{"queue/doc.go", "queue"},
	} {
		text, err := os.ReadFile(filepath.Join(root, doc.file))
		if err != nil {
			t.Fatal(err)
		}
		refs := goFileRef.FindAllString(string(text), -1)
		if len(refs) == 0 {
			t.Errorf("%s names no Go file: is the pattern broken?", doc.file)
		}
		for _, ref := range refs {
			var ok bool
			switch {
			case doc.dir != "":
				_, err := os.Stat(filepath.Join(root, doc.dir, ref))
				ok = err == nil
			case filepath.Base(ref) != ref:
				_, err := os.Stat(filepath.Join(root, ref))
				ok = err == nil
			default:
				ok = bases[ref]
			}
			if !ok {
				t.Errorf("%s names %s, which does not exist", doc.file, ref)
			}
		}
	}
}
