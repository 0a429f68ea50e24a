// Package modtest holds the checks every metaqueue module's tests make of
// the module contract (docs/design/core.md, "The core and its modules").
package modtest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// Imports checks the package in the current directory (a test's): its
// non-test files import the standard library, the public job and
// protocol packages and internal leaf packages only, never the
// metaqueue core nor another of its modules.
func Imports(t testing.TB) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, im := range af.Imports {
			p, _ := strconv.Unquote(im.Path.Value)
			const mq = "github.com/mq-hpc/mq/"
			switch {
			case !strings.Contains(p, "."): // the standard library
			case p == mq+"job", p == mq+"protocol":
			case strings.HasPrefix(p, mq+"internal/metaqueue"):
				t.Errorf("%s imports %s: a module never imports the core or another module", f, p)
			case strings.HasPrefix(p, mq+"internal/") && strings.Count(p[len(mq):], "/") == 1: // a leaf: internal/NAME
			default:
				t.Errorf("%s imports %s", f, p)
			}
		}
	}
}

// Asked is how a module's code asks for a query of its .sql file by
// name: queries.Get("Name").
var Asked = regexp.MustCompile(`queries\.Get\("(\w+)"\)`)

// QueriesUsed checks that every query of sqlName (names) is asked for by
// name in the package's non-test files in the current directory (a
// test's), as asked matches them (its first group is the name), and that
// every name asked for there is one of them: Get panics on an unknown
// name only when the code runs.
func QueriesUsed(t testing.TB, sqlName string, names []string, asked *regexp.Regexp) {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range asked.FindAllStringSubmatch(string(b), -1) {
			used[m[1]] = true
		}
	}
	for _, n := range names {
		if !used[n] {
			t.Errorf("query %s of %s is not used", n, sqlName)
		}
		delete(used, n)
	}
	for n := range used {
		t.Errorf("query %s is used but not in %s", n, sqlName)
	}
}
