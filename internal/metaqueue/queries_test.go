package metaqueue

import (
	"context"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/inspect"
	"github.com/mq-hpc/mq/internal/sqlfile"
)

// coreQueries are the core's .sql files by name, each with the variable
// the code reads it through.
var coreQueries = map[string]struct {
	varName string
	q       sqlfile.Queries
}{
	"jobs.sql":     {"jobsSQL", jobsSQL},
	"targets.sql":  {"targetsSQL", targetsSQL},
	"queues.sql":   {"queuesSQL", queuesSQL},
	"attempts.sql": {"attemptsSQL", attemptsSQL},
	"conn.sql":     {"connSQL", connSQL},
}

// fragments are queries that name a row of an enclosing query, and the
// query each is prepared inside.
var fragments = map[string]string{}

// TestQueriesPrepare prepares every named query of every core .sql file
// against a new database, so a typo or a column the schema no longer has
// fails here and not in the CLS; and the statements the builders make.
func TestQueriesPrepare(t *testing.T) {
	files, err := filepath.Glob("*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(coreQueries) {
		t.Errorf(".sql files %v; coreQueries knows %d: add a new file there", files, len(coreQueries))
	}
	ctx := context.Background()
	w, wdb, rdb, err := openDB(ctx, filepath.Join(t.TempDir(), "mq.db"), SyncNormal, true)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { w.Close(); wdb.Close(); rdb.Close() }()
	prepare := func(what, text string) {
		t.Helper()
		s, err := w.PrepareContext(ctx, text)
		if err != nil {
			t.Errorf("%s: %v\n%s", what, err, text)
			return
		}
		s.Close()
	}
	n := 0
	for _, file := range files {
		f, ok := coreQueries[file]
		if !ok {
			t.Errorf("%s: not in coreQueries", file)
			continue
		}
		names := f.q.Names()
		slices.Sort(names)
		for _, name := range names {
			text := f.q.Get(name)
			// Builders drop the final ";" and append clauses: a query is
			// one statement that ends with it. Nothing may follow it: the
			// driver keeps a prepared statement compiled only when its text
			// has no tail (a trailing newline made a statement's Exec
			// parse it again on each run, several times slower).
			if !strings.HasSuffix(text, ";") || statementEnds(text) != 1 {
				t.Errorf("%s %s: want one statement ending in \";\", got %q", file, name, text)
			}
			if wrap, ok := fragments[file+" "+name]; ok {
				text = strings.Replace(wrap, "%s", f.q.Base(name), 1)
			}
			prepare(file+" "+name, text)
			n++
		}
	}
	if n < 30 { // the core keeps 36; the modules prepare theirs
		t.Errorf("prepared %d queries; want every one of the core's", n)
	}
	for _, b := range []struct{ what, text string }{
		{"insJobsSQL", insJobsSQL},
		{"InsertPrereq multi-row", sqlfile.MultiRow(jobsSQL.Get("InsertPrereq"), bulkRows)},
		{"claimSQL(1)", claimSQL(1, claimNone)},
		{"claimSQL(7)", claimSQL(7, claimSome)},
		{"Job's listing", inspect.JobQuery()},
	} {
		if b.text != strings.TrimSpace(b.text) {
			t.Errorf("%s: space at an end of %q", b.what, b.text)
		}
		prepare(b.what, b.text)
	}
	// The builders' counts: a statement with the wrong number of
	// parameters fails when run.
	if _, err := w.ExecContext(ctx, claimSQL(3, claimNone), 1, 2, 10, 11, 12); err != nil {
		t.Errorf("claimSQL(3) with 5 arguments: %v", err)
	}
	var args []any
	for i := range bulkRows {
		args = append(args, i+1, 1, 1, "Q", "true", "/", nil, 0)
	}
	if _, err := w.ExecContext(ctx, "SAVEPOINT t"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.ExecContext(ctx, insJobsSQL, args...); err != nil {
		t.Errorf("insJobsSQL with %d arguments: %v", len(args), err)
	}
	if _, err := w.ExecContext(ctx, "ROLLBACK TO t"); err != nil {
		t.Fatal(err)
	}
}

// statementEnds counts the semicolons of text outside comment lines and
// quoted strings.
func statementEnds(text string) int {
	n := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "--") {
			continue
		}
		quoted := false
		for _, c := range line {
			switch {
			case c == '\'':
				quoted = !quoted
			case c == ';' && !quoted:
				n++
			}
		}
	}
	return n
}

// goFiles parses the package's non-test Go files.
func goFiles(t *testing.T) (*token.FileSet, map[string]*ast.File) {
	t.Helper()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	out := map[string]*ast.File{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = f
	}
	if len(out) < 10 {
		t.Fatalf("parsed %d files; run from the package directory", len(out))
	}
	return fset, out
}

// queryRef is a Go file's use of a named query: file.Get("Name") or
// file.Base("Name").
type queryRef struct {
	file, name string // file is the .sql file
	pos        token.Position
}

// queryRefs finds every use of a named query in f.
func queryRefs(t *testing.T, fset *token.FileSet, f *ast.File) []queryRef {
	t.Helper()
	byVar := map[string]string{}
	for file, q := range coreQueries {
		byVar[q.varName] = file
	}
	var out []queryRef
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok || len(call.Args) == 0 {
			return true
		}
		var recv, name ast.Expr
		if fn, ok := call.Fun.(*ast.SelectorExpr); ok && (fn.Sel.Name == "Get" || fn.Sel.Name == "Base") && len(call.Args) == 1 {
			recv, name = fn.X, call.Args[0]
		}
		id, ok := recv.(*ast.Ident)
		if !ok || byVar[id.Name] == "" {
			return true
		}
		pos := fset.Position(call.Pos())
		lit, ok := name.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			t.Errorf("%s: a query is named by a string literal, so tests can check it", pos)
			return true
		}
		s, _ := strconv.Unquote(lit.Value)
		out = append(out, queryRef{byVar[id.Name], s, pos})
		return true
	})
	return out
}

// TestQueriesNamed checks the code and the .sql files agree: every query
// the code names is in its file (Get would panic in the CLS), and every
// query of a file is used.
func TestQueriesNamed(t *testing.T) {
	fset, files := goFiles(t)
	used := map[string]bool{}
	for _, f := range files {
		for _, r := range queryRefs(t, fset, f) {
			if !slices.Contains(coreQueries[r.file].q.Names(), r.name) {
				t.Errorf("%s: %s has no query %s", r.pos, r.file, r.name)
			}
			used[r.file+" "+r.name] = true
		}
	}
	for file, f := range coreQueries {
		for _, name := range f.q.Names() {
			if !used[file+" "+name] {
				t.Errorf("%s: query %s is not used", file, name)
			}
		}
	}
}

// TestNoSQLInCoreGo keeps the core's SQL in its .sql files: no string in
// a core Go file holds a statement. Builders keep clauses (WHERE, AND,
// ORDER BY, LIMIT); the DDL is package schema's.
func TestNoSQLInCoreGo(t *testing.T) {
	var (
		stmt = regexp.MustCompile(`\b(SELECT|INSERT|UPDATE|DELETE|REPLACE\s+INTO|PRAGMA|BEGIN|COMMIT|ROLLBACK|SAVEPOINT|RELEASE)\b`)
		ddl  = regexp.MustCompile(`\b(CREATE|ALTER|DROP)\s+(TABLE|INDEX|VIEW|TRIGGER)\b`)
	)
	fset, files := goFiles(t)
	checked := 0
	for _, f := range files {
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if m := stmt.FindString(s); m != "" {
				t.Errorf("%s: %s in Go: move the statement to a .sql file", fset.Position(lit.Pos()), m)
			}
			if m := ddl.FindString(s); m != "" {
				t.Errorf("%s: %s in Go: the schema is in schema/migrations/", fset.Position(lit.Pos()), m)
			}
			return true
		})
	}
	if checked < 15 {
		t.Errorf("checked %d core files", checked)
	}
}

// TestStateQueriesOnlyInLifecycle extends TestStateWrittenOnlyInLifecycle
// to the .sql files: a query that inserts jobs or sets jobs.state is in
// jobs.sql, and only lifecycle.go names it.
func TestStateQueriesOnlyInLifecycle(t *testing.T) {
	var (
		insertJobs = regexp.MustCompile(`(?i)\b(INSERT|REPLACE)\s+(OR\s+\w+\s+)?INTO\s+jobs\b`)
		updateJobs = regexp.MustCompile(`(?is)\bUPDATE\s+jobs\s+SET\s+(.*?)(\bWHERE\b|\bRETURNING\b|$)`)
		setsState  = regexp.MustCompile(`(?i)(^|[\s,])state\s*=`)
	)
	writes := func(sql string) bool {
		if insertJobs.MatchString(sql) {
			return true
		}
		for _, m := range updateJobs.FindAllStringSubmatch(sql, -1) {
			if setsState.MatchString(m[1]) {
				return true
			}
		}
		return false
	}
	state := map[string]bool{}
	for file, f := range coreQueries {
		for _, name := range f.q.Names() {
			if writes(f.q.Get(name)) {
				if file != "jobs.sql" {
					t.Errorf("%s %s writes jobs.state: keep it in jobs.sql", file, name)
				}
				state[file+" "+name] = true
			}
		}
	}
	if len(state) < 8 {
		t.Errorf("found %d queries that write jobs.state; the check has lost them", len(state))
	}
	fset, files := goFiles(t)
	for name, f := range files {
		if name == "lifecycle.go" {
			continue
		}
		for _, r := range queryRefs(t, fset, f) {
			if state[r.file+" "+r.name] {
				t.Errorf("%s: names %s, a state write, outside lifecycle.go", r.pos, r.name)
			}
		}
	}
	// A module's own SQL never writes a job's state: the core does.
	mods, err := filepath.Glob("*/*.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range mods {
		text, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		q, err := sqlfile.Parse(path, string(text))
		if err != nil {
			t.Errorf("%v", err)
			continue
		}
		for _, name := range q.Names() {
			if writes(q.Get(name)) {
				t.Errorf("%s %s writes jobs.state: only lifecycle.go does", path, name)
			}
		}
	}
}
