// Package sqlfile reads named queries from SQL files, as sqlc and river
// keep theirs: each query follows a line "-- name: Name" and runs to the
// next such line. A package embeds its .sql file and parses it once:
//
//	//go:embed jobs.sql
//	var jobsSQL string
//	var q = sqlfile.MustParse("jobs.sql", jobsSQL)
//	... db.Exec(q.Get("SetState"), ...)
//
// Keeping SQL in .sql files lets a reader see a table family's queries
// together and lets an editor check them as SQL.
package sqlfile

import (
	"bufio"
	"fmt"
	"strings"
)

// Queries are the named queries of one file.
type Queries struct {
	file   string
	byName map[string]string
}

// Parse reads the named queries of src (the text of file, which names it in
// errors). A name is a Go identifier and appears once; text before the
// first name must be comments or blank; a query may not be empty.
func Parse(file, src string) (Queries, error) {
	q := Queries{file: file, byName: map[string]string{}}
	var name string
	var body strings.Builder
	flush := func(line int) error {
		if name == "" {
			return nil
		}
		text := strings.TrimSpace(body.String())
		if text == "" {
			return fmt.Errorf("%s:%d: query %s is empty", file, line, name)
		}
		q.byName[name] = text
		body.Reset()
		return nil
	}
	sc := bufio.NewScanner(strings.NewReader(src))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if rest, ok := strings.CutPrefix(trimmed, "-- name:"); ok {
			if err := flush(n); err != nil {
				return Queries{}, err
			}
			name = strings.TrimSpace(rest)
			if !isIdent(name) {
				return Queries{}, fmt.Errorf("%s:%d: %q is not a query name (a Go identifier)", file, n, name)
			}
			if _, dup := q.byName[name]; dup {
				return Queries{}, fmt.Errorf("%s:%d: query %s named twice", file, n, name)
			}
			q.byName[name] = "" // reserve, so a second use is caught before its body ends
			continue
		}
		if name == "" {
			if trimmed != "" && !strings.HasPrefix(trimmed, "--") {
				return Queries{}, fmt.Errorf("%s:%d: SQL before the first \"-- name:\" line", file, n)
			}
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return Queries{}, fmt.Errorf("%s: %w", file, err)
	}
	if err := flush(n); err != nil {
		return Queries{}, err
	}
	return q, nil
}

// MustParse is Parse for a file embedded in the program, where an error is
// the programmer's: it panics, as regexp.MustCompile does.
func MustParse(file, src string) Queries {
	q, err := Parse(file, src)
	if err != nil {
		panic("sqlfile: " + err.Error())
	}
	return q
}

// Get returns the query called name. An unknown name is a programming
// error (the file and the code disagree): Get panics, and every package's
// tests run each of its queries at least once.
func (q Queries) Get(name string) string {
	text, ok := q.byName[name]
	if !ok {
		panic(fmt.Sprintf("sqlfile: %s has no query %s", q.file, name))
	}
	return text
}

// Base returns the query called name without its final ";", for a
// builder to append clauses to (WHERE, AND ..., ORDER BY, LIMIT): the file
// keeps one complete statement, which the tests prepare as it is.
func (q Queries) Base(name string) string {
	return strings.TrimSuffix(q.Get(name), ";")
}

// MultiRow makes a one-row "INSERT ... VALUES (...)" insert n rows: the
// VALUES row is repeated n times.
func MultiRow(insert string, n int) string {
	insert = strings.TrimSuffix(insert, ";")
	i := strings.LastIndex(insert, "VALUES")
	row := strings.TrimSpace(insert[i+len("VALUES"):])
	return insert[:i] + "VALUES " + strings.TrimSuffix(strings.Repeat(row+",", n), ",")
}

// InList expands the IN list marked "/*SLICE:name*/?" (sqlc's mark for a
// slice) in query to n parameters.
func InList(query, name string, n int) string {
	return strings.Replace(query, "/*SLICE:"+name+"*/?", strings.TrimSuffix(strings.Repeat("?,", n), ","), 1)
}

// Names returns the names of every query, for tests that prepare them all.
func (q Queries) Names() []string {
	out := make([]string, 0, len(q.byName))
	for n := range q.byName {
		out = append(out, n)
	}
	return out
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		switch {
		case r == '_', 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z':
		case '0' <= r && r <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}
