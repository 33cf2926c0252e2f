// Package internal_test holds the module-wide tests: the layering (which
// package may import which), and that the docs name Go files that exist
// (docpaths_test.go). It has no code of its own.
package internal_test

import (
	"bufio"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// layers are the module's top-level directories from the ground up. A
// package may import a package of its own directory or of a lower layer,
// never one of its own layer's other directories (pool and queue do not
// import each other) nor one above it: internal/ is the ground floor and
// imports nothing of the module outside internal/.
var layers = []struct {
	name string
	dirs []string
}{
	{"the ground floor", []string{"internal"}},
	{"the building blocks", []string{"jumphash", "streaming", "rmap", "limit"}},
	{"the shapes", []string{"pool", "queue"}},
	{"the test kit", []string{"shepherdtest"}},
	{"the dashboard", []string{"dashboard"}},
	{"the programs", []string{"cmd", "examples"}},
}

// TestLayering parses the imports of every Go file of the module, tests
// included (go/parser, no build tags applied: a file behind a tag counts
// too), and fails for each import that goes up or sideways.
func TestLayering(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	module, err := modulePath(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	imports, err := moduleImports(root, module)
	if err != nil {
		t.Fatal(err)
	}
	if len(imports) == 0 {
		t.Fatal("found no import of the module's own packages: is the walk broken?")
	}
	rank := map[string]int{}
	for i, l := range layers {
		for _, d := range l.dirs {
			rank[d] = i
		}
	}
	for _, imp := range imports {
		from, to := topDir(imp.dir), topDir(imp.path)
		rf, okf := rank[from]
		rt, okt := rank[to]
		switch {
		case !okf:
			t.Errorf("%s: directory %q is in no layer: add it to layers in internal/layering_test.go", imp.file, from)
		case !okt:
			t.Errorf("%s imports %s: directory %q is in no layer: add it to layers in internal/layering_test.go", imp.file, imp.path, to)
		case from == to || rt < rf:
			// Within a directory, or downward.
		case rt == rf:
			t.Errorf("%s imports %s: %s and %s are both %s, which do not import each other", imp.file, module+"/"+imp.path, from, to, layers[rf].name)
		default:
			t.Errorf("%s imports %s: %s (%s) imports nothing of %s above it", imp.file, module+"/"+imp.path, from, layers[rf].name, layers[rt].name)
		}
	}
}

// moduleImport is an import of one of the module's own packages.
type moduleImport struct {
	file string // the importing file, relative to the module root
	dir  string // its directory, relative to the module root
	path string // the imported package, relative to the module path
}

// moduleImports returns every import of the module's own packages by the
// Go files under root, in file order. Hidden directories, testdata and
// vendor are skipped, as the go command does.
func moduleImports(root, module string) ([]moduleImport, error) {
	var out []moduleImport
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		for _, spec := range f.Imports {
			p, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("%s: %w", rel, err)
			}
			if sub, ok := strings.CutPrefix(p, module+"/"); ok {
				out = append(out, moduleImport{file: rel, dir: filepath.ToSlash(filepath.Dir(rel)), path: sub})
			} else if p == module {
				out = append(out, moduleImport{file: rel, dir: filepath.ToSlash(filepath.Dir(rel)), path: "."})
			}
		}
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].file < out[j].file })
	return out, err
}

// topDir is the first element of a slash-separated path relative to the
// module root ("." for the root itself).
func topDir(rel string) string {
	first, _, _ := strings.Cut(rel, "/")
	return first
}

// modulePath reads the module line of a go.mod.
func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(p), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}
