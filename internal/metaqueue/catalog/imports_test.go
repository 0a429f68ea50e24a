package catalog

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the catalog a module: it imports the standard
// library, the public job and protocol packages and the internal leaf
// packages, never the metaqueue's core nor another module of it.
func TestImports(t *testing.T) {
	const mod = "github.com/mq-hpc/mq/"
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, src, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			rest, ours := strings.CutPrefix(path, mod)
			switch {
			case !ours:
				if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
					t.Errorf("%s imports %s: not the standard library", name, path)
				}
			case rest == "job" || rest == "protocol":
			case strings.HasPrefix(rest, "internal/metaqueue"):
				t.Errorf("%s imports %s: a module never imports the core or another module", name, path)
			case strings.HasPrefix(rest, "internal/") && strings.Count(rest, "/") == 1:
			default:
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}
