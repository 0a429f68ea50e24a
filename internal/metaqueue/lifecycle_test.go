package metaqueue

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestStateWrittenOnlyInLifecycle keeps every write of a job's state in
// lifecycle.go: no other file of the package may hold SQL that sets
// jobs.state or inserts jobs, run the statements that do, or move a job in
// the graph.
func TestStateWrittenOnlyInLifecycle(t *testing.T) {
	var (
		insertJobs = regexp.MustCompile(`(?i)\b(INSERT|REPLACE)\s+(OR\s+\w+\s+)?INTO\s+jobs\b`)
		updateJobs = regexp.MustCompile(`(?is)\bUPDATE\s+jobs\s+SET\s+(.*?)(\bWHERE\b|\bRETURNING\b|$)`)
		setsState  = regexp.MustCompile(`(?i)(^|[\s,])state\s*=`)
	)
	stateStmts := map[string]bool{"setState": true, "finish": true, "requeue": true, "unclaim": true, "rerun": true,
		"insJob": true, "insJobs": true, "dispatchN": true}
	graphMoves := map[string]bool{"Set": true, "Requeue": true, "Revive": true, "Reconcile": true, "AddJob": true}

	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") || name == "lifecycle.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if n.Kind != token.STRING {
					break
				}
				sql, err := strconv.Unquote(n.Value)
				if err != nil {
					break
				}
				if insertJobs.MatchString(sql) {
					t.Errorf("%s: inserts jobs outside lifecycle.go", fset.Position(n.Pos()))
				}
				for _, m := range updateJobs.FindAllStringSubmatch(sql, -1) {
					if setsState.MatchString(m[1]) {
						t.Errorf("%s: sets jobs.state outside lifecycle.go", fset.Position(n.Pos()))
					}
				}
			case *ast.SelectorExpr:
				x, ok := n.X.(*ast.SelectorExpr)
				if !ok {
					break
				}
				switch {
				case x.Sel.Name == "stmts" && stateStmts[n.Sel.Name]:
					t.Errorf("%s: runs stmts.%s, a state write, outside lifecycle.go", fset.Position(n.Pos()), n.Sel.Name)
				case x.Sel.Name == "g" && graphMoves[n.Sel.Name]:
					t.Errorf("%s: moves a job in the graph (g.%s) outside lifecycle.go", fset.Position(n.Pos()), n.Sel.Name)
				}
			}
			return true
		})
	}
	if checked < 10 {
		t.Fatalf("checked %d files; run from the package directory", checked)
	}
}
