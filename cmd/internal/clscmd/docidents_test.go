package clscmd

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestDocIdentifiers: every Go name the reference, design and guide docs
// cite as `pkg.Name`, `pkg.Type.Member` or `Type.Member`, where pkg is a
// package of this module and Type one of its types, is declared there. A
// renamed or deleted function otherwise leaves the docs naming code that
// is not there (dispatch.md named nextState long after it became
// runs.Next). The history under docs/history is what was, and is not read.
func TestDocIdentifiers(t *testing.T) {
	const root = "../../.."
	d := declarations(t, root)
	var docs []string
	for _, glob := range []string{"*.md", "docs/*/*.md"} {
		m, err := filepath.Glob(filepath.Join(root, glob))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, m...)
	}
	cited := regexp.MustCompile("`([A-Za-z_][A-Za-z0-9_]*(?:\\.[A-Za-z_][A-Za-z0-9_]*){1,2}|[a-z]+[A-Z][A-Za-z0-9]*)(?:\\(\\))?`")
	checked := 0
	for _, path := range docs {
		if strings.Contains(path, "/history/") {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range cited.FindAllStringSubmatch(string(b), -1) {
			name := m[1]
			if foreign[name] {
				continue
			}
			ok, known := d.has(name)
			if !known {
				continue
			}
			checked++
			if !ok {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s cites `%s`, which the code does not declare", rel, name)
			}
		}
	}
	t.Logf("%d names checked", checked)
	if checked < 100 {
		t.Fatalf("only %d names checked: the docs or the parse moved", checked)
	}
}

// foreign are names the docs cite of other programs' code and formats.
var foreign = map[string]bool{
	"dag.finish":    true, // Snakemake's
	"innerHTML":     true, // the DOM's
	"textContent":   true,
	"coreCount":     true, // WfFormat's
	"memoryInBytes": true,
	"vOP":           true, // a variable of the LP in lp.md
}

// decls is what the module's Go files declare.
type decls struct {
	pkgs    map[string]map[string]bool // package name -> its top-level names and its types' members
	members map[string]map[string]bool // type name -> its fields and methods
	skip    map[string]bool            // first parts that also name tables, ops and files
	any     map[string]bool            // every name declared, in any package or type
}

// has says whether name is declared (ok), when its first part is a
// package or type of the module and the rest is not a table's column, an
// op's or a file's name (known).
func (d decls) has(name string) (ok, known bool) {
	parts := strings.Split(name, ".")
	if len(parts) == 1 { // a bare name: declared anywhere in the module
		return d.any[name], true
	}
	if d.skip[parts[0]] || d.skip[parts[len(parts)-1]] {
		return false, false
	}
	if p := d.pkgs[parts[0]]; p != nil {
		if !p[parts[1]] {
			return false, true
		}
		if len(parts) == 3 {
			return d.members[parts[1]][parts[2]], true
		}
		return true, true
	}
	if m := d.members[parts[0]]; m != nil && len(parts) == 2 {
		return m[parts[1]], true
	}
	return false, false
}

func declarations(t *testing.T, root string) decls {
	t.Helper()
	d := decls{pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{}, skip: map[string]bool{}, any: map[string]bool{}}
	add := func(m map[string]map[string]bool, k, v string) {
		d.any[v] = true
		if m[k] == nil {
			m[k] = map[string]bool{}
		}
		m[k][v] = true
	}
	// Tables (jobs.state), ops (files.pull) and file names (dispatch.go)
	// share a form with Go names: their parts are not checked.
	for _, w := range []string{"go", "sql", "md", "log", "sock", "lock", "json", "db", "txt", "sh"} {
		d.skip[w] = true
	}
	printed := regexp.MustCompile(`^[a-z]+[A-Z][A-Za-z0-9]*$`)
	table := regexp.MustCompile(`(?i)CREATE TABLE(?: IF NOT EXISTS)? ([a-z_]+)`)
	op := regexp.MustCompile(`Name: "([a-z]+)\.[a-z_.]+"`)
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if e.IsDir() {
			if n := e.Name(); n == ".git" || n == "testdata" || n == "node_modules" {
				return filepath.SkipDir
			}
			return nil
		}
		switch {
		case strings.HasSuffix(path, ".sql"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range table.FindAllStringSubmatch(string(b), -1) {
				d.skip[m[1]] = true
			}
			return nil
		case !strings.HasSuffix(path, ".go"):
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		if filepath.Base(filepath.Dir(path)) == "protocol" && !strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, m := range op.FindAllStringSubmatch(string(b), -1) {
				d.skip[m[1]] = true
			}
		}
		if !strings.HasSuffix(path, "_test.go") {
			// A name the program prints (a check's, a metric's) is cited
			// as it prints it.
			ast.Inspect(f, func(n ast.Node) bool {
				if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
					if v, err := strconv.Unquote(lit.Value); err == nil && printed.MatchString(v) {
						d.any[v] = true
					}
				}
				return true
			})
		}
		pkg := f.Name.Name
		if strings.HasSuffix(path, "_test.go") {
			// Tests' names count (docs cite harnesses), under the package
			// they test.
			pkg = strings.TrimSuffix(pkg, "_test")
		}
		for _, decl := range f.Decls {
			switch x := decl.(type) {
			case *ast.FuncDecl:
				if r := receiver(x); r != "" {
					add(d.members, r, x.Name.Name)
					add(d.pkgs, pkg, x.Name.Name) // pkg.Method: the docs' shorthand for a module's method
				} else {
					add(d.pkgs, pkg, x.Name.Name)
				}
			case *ast.GenDecl:
				for _, sp := range x.Specs {
					switch s := sp.(type) {
					case *ast.TypeSpec:
						add(d.pkgs, pkg, s.Name.Name)
						if d.members[s.Name.Name] == nil {
							d.members[s.Name.Name] = map[string]bool{}
						}
						ast.Inspect(s.Type, func(n ast.Node) bool {
							if fl, ok := n.(*ast.Field); ok {
								for _, id := range fl.Names {
									add(d.members, s.Name.Name, id.Name)
								}
								if j := jsonName(fl.Tag); j != "" { // the wire's name of it
									add(d.members, s.Name.Name, j)
								}
								if len(fl.Names) == 0 { // embedded: its name is a member
									if id := embedded(fl.Type); id != "" {
										add(d.members, s.Name.Name, id)
									}
								}
							}
							return true
						})
					case *ast.ValueSpec:
						for _, id := range s.Names {
							add(d.pkgs, pkg, id.Name)
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The standard library's packages share names with none of the
	// module's but these; their names are not checked.
	for _, std := range []string{"os", "time", "io", "net", "http", "exec", "slog", "sql", "context", "syscall", "strings", "bytes", "sync", "json", "errors", "utf8", "bufio", "filepath", "runtime", "fmt", "iter", "heap", "rand", "flag", "sort", "testing", "atomic"} {
		if _, ours := d.pkgs[std]; !ours {
			d.skip[std] = true
		}
	}
	return d
}

// jsonName is the name a field's json tag gives it ("" if none).
func jsonName(tag *ast.BasicLit) string {
	if tag == nil {
		return ""
	}
	v, _ := strconv.Unquote(tag.Value)
	name, _, _ := strings.Cut(reflect.StructTag(v).Get("json"), ",")
	return name
}

// receiver is the name of fd's receiver type ("" for a function).
func receiver(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return ""
	}
	return embedded(fd.Recv.List[0].Type)
}

// embedded is the type name in e: T, *T, T[X], pkg.T ("" otherwise).
func embedded(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.SelectorExpr:
			return x.Sel.Name
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}
