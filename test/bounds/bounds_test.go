// Package bounds holds the size bounds DESIGN.md sets the tree ("Package
// sizes"): no non-test package over 5,000 lines, no file over 800 and no
// function over 120 without a reason written there.
package bounds

import (
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

const (
	maxPackage  = 5000
	maxFile     = 800
	maxFunction = 120
)

// generated is the line go generate's tools put before a file's package.
var generated = regexp.MustCompile(`(?m)^// Code generated .* DO NOT EDIT\.$`)

func TestSizeBounds(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	design, err := os.ReadFile(filepath.Join(root, "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sizes, _ := strings.Cut(string(design), "## Package sizes")
	sizes, _, _ = strings.Cut(sizes, "\n## ")
	packages := map[string]int{}
	fset := token.NewFileSet()
	err = walkSources(root, func(path, rel string, src []byte, lines int) error {
		packages[filepath.Dir(rel)] += lines
		if lines > maxFile && !strings.Contains(sizes, "`"+rel+"`") {
			t.Errorf("%s is %d lines (bound %d): split it, or say in DESIGN.md's Package sizes why not", rel, lines, maxFile)
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1
			if n > maxFunction && !strings.Contains(sizes, "`"+funcName(fn)+"`") {
				t.Errorf("%s: %s is %d lines (bound %d): split it where its seam is, or say in DESIGN.md's Package sizes why not", rel, funcName(fn), n, maxFunction)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, n := range packages {
		if n <= maxPackage {
			continue
		}
		if said, ok := statedSize(sizes, dir); !ok {
			t.Errorf("package %s is %d non-test lines (bound %d): move a part into a package of its own, or say in DESIGN.md's Package sizes why not, and its size", dir, n, maxPackage)
		} else if said < n {
			// Naming a package once must not let it grow unseen.
			t.Errorf("package %s is %d non-test lines; DESIGN.md's Package sizes says %d: move a part out, or say its size and why", dir, n, said)
		}
	}
	if len(packages) < 50 {
		t.Errorf("only %d packages found under %s: the walk missed the tree", len(packages), root)
	}
}

// walkSources calls f for every non-test, non-generated Go file under
// root (testdata, vendor and dot directories left out): its path, its
// path from root with slashes, its text and its lines.
func walkSources(root string, f func(path, rel string, src []byte, lines int) error) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if generated.Match(src) {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		return f(path, filepath.ToSlash(rel), src, bytes.Count(src, []byte("\n")))
	})
}

// funcName is fn as DESIGN.md would name it: Name, or Type.Name.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr:
			typ = x.X
			continue
		case *ast.IndexListExpr:
			typ = x.X
			continue
		}
		break
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// sizeAfter is the first figure after a package's name, "5,431" or "5431".
var sizeAfter = regexp.MustCompile(`^[^0-9]{0,40}?([0-9]{1,3}(?:,[0-9]{3})+|[0-9]+)`)

// statedSize is the size sizes (DESIGN.md's Package sizes) gives package
// dir: the first figure after its backticked name, within a few words.
func statedSize(sizes, dir string) (int, bool) {
	_, after, ok := strings.Cut(sizes, "`"+dir+"`")
	if !ok {
		return 0, false
	}
	m := sizeAfter.FindStringSubmatch(after)
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(strings.ReplaceAll(m[1], ",", ""))
	return n, err == nil
}

func TestStatedSize(t *testing.T) {
	t.Parallel()
	const sizes = "The commands' package,\n`cmd/a`, is at 5,431: ... `cmd/b` (4933 lines) and `cmd/c` stays whole.\n`cmd/d` " + "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa 7,000"
	for _, tc := range []struct {
		dir  string
		want int
		ok   bool
	}{
		{"cmd/a", 5431, true},
		{"cmd/b", 4933, true},
		{"cmd/c", 0, false}, // named, no figure near
		{"cmd/d", 0, false}, // a figure too far off to be its
		{"cmd/e", 0, false}, // not named
	} {
		if got, ok := statedSize(sizes, tc.dir); got != tc.want || ok != tc.ok {
			t.Errorf("statedSize(%s) = %d, %v; want %d, %v", tc.dir, got, ok, tc.want, tc.ok)
		}
	}
}

// TestStatedSizes: every size DESIGN.md's Package sizes gives a package
// (by its path, or by its path under internal/ or internal/metaqueue/)
// or a file is within a tenth of what it is, so the figures a reader
// weighs the tree by do not go stale as it grows.
func TestStatedSizes(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	design, err := os.ReadFile(filepath.Join(root, "DESIGN.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, sizes, _ := strings.Cut(string(design), "## Package sizes")
	sizes, _, _ = strings.Cut(sizes, "\n## ")
	packages, files := map[string]int{}, map[string]int{}
	err = walkSources(root, func(_, rel string, _ []byte, lines int) error {
		packages[filepath.Dir(rel)] += lines
		files[rel] = lines
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	check := func(what, name string, n int) {
		said, ok := statedSize(sizes, name)
		if !ok {
			return
		}
		checked++
		if d := said - n; d*10 > n || -d*10 > n {
			t.Errorf("DESIGN.md's Package sizes says %s %s is %d lines; it is %d: say its size", what, name, said, n)
		}
	}
	for dir, n := range packages {
		names := []string{dir}
		for _, prefix := range []string{"internal/metaqueue/", "internal/"} {
			if short, ok := strings.CutPrefix(dir, prefix); ok {
				names = append(names, short)
			}
		}
		for _, name := range names {
			check("package", name, n)
		}
	}
	for rel, n := range files {
		if n > maxFile {
			check("file", rel, n)
		}
	}
	t.Logf("%d stated sizes checked", checked)
	if checked < 20 {
		t.Errorf("only %d sizes found in DESIGN.md's Package sizes: the lookup missed them", checked)
	}
}
