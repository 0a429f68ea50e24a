package metaqueue

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestModulesApart: the metaqueue's features are packages below it
// (ledger, plans, catalog, copies, ...) that meet only through the core's
// hooks: none imports the core or another of them, so no feature can reach
// into another's state behind the core's back.
func TestModulesApart(t *testing.T) {
	const core = "github.com/mq-hpc/mq/internal/metaqueue"
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		files, _ := filepath.Glob(filepath.Join(e.Name(), "*.go"))
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, im := range af.Imports {
				path, _ := strconv.Unquote(im.Path.Value)
				if path == core || strings.HasPrefix(path, core+"/") {
					t.Errorf("%s imports %s: a module meets the core and the other modules only through the core's hooks", f, path)
				}
			}
		}
	}
}
