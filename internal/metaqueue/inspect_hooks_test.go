package metaqueue

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/sqlfile"
)

// TestReadQueries prepares every query of the read side's SQL files
// against the schema the migrations make, as TestQueriesPrepare does the
// core's: a column the schema lost fails here, not in mqstat. A fragment
// (a condition's subquery on a listed job j) is prepared inside a listing.
func TestReadQueries(t *testing.T) {
	fragments := map[string]string{
		"inspect/inspect.sql InArray": "SELECT j.id FROM jobs j WHERE NOT EXISTS (%s)",
	}
	e := newEnv(t)
	for _, file := range []string{"inspect/inspect.sql", "progress/progress.sql"} {
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		q, err := sqlfile.Parse(file, string(src))
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range q.Names() {
			text := q.Get(name)
			if statementEnds(text) != 1 || !strings.HasSuffix(text, ";") {
				t.Errorf("%s %s: want one statement ending in \";\", got %q", file, name, text)
			}
			if wrap, ok := fragments[file+" "+name]; ok {
				text = strings.Replace(wrap, "%s", strings.TrimSuffix(text, ";"), 1)
			}
			st, err := e.s.rdb.PrepareContext(context.Background(), text)
			if err != nil {
				t.Errorf("%s %s: %v", file, name, err)
				continue
			}
			st.Close()
		}
	}
}

// The read side is one Reader for the store's life, so the queries it
// prepares (inspect's statement cache) serve every request, rather than
// being prepared, and kept by the pool, anew per request.
func TestInspectIsOneReader(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	if e.s.Inspect() != e.s.Inspect() {
		t.Fatal("Inspect returns a new Reader each call")
	}
}
