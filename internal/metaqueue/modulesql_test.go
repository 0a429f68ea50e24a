package metaqueue

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/sqlfile"
)

// TestModuleQueriesPrepare prepares every query of the arrays, bundles,
// tokens, sharedenv and placeholders modules' SQL files against the schema the
// migrations make, as TestQueriesPrepare does the core's: a typo or a
// column the schema lost fails here, not in the CLS.
func TestModuleQueriesPrepare(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for _, path := range []string{"arrays/arrays.sql", "bundles/bundles.sql", "tokens/tokens.sql",
		"placeholders/placeholders.sql", "placeholders/sites.sql", "extents/extents.sql", "purge/purge.sql",
		"selector/selector.sql", "priorities/priorities.sql", "sharedenv/sharedenv.sql", "alter/alter.sql",
		"packing/packing.sql"} {
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		q, err := sqlfile.Parse(path, string(src))
		if err != nil {
			t.Fatal(err)
		}
		if len(q.Names()) == 0 {
			t.Errorf("%s: no queries", path)
		}
		err = e.s.do(context.Background(), func() error {
			for _, name := range q.Names() {
				text := q.Get(name)
				if !strings.HasSuffix(text, ";") || statementEnds(text) != 1 {
					t.Errorf("%s %s: want one statement ending in \";\", got %q", path, name, text)
				}
				st, err := e.s.w.PrepareContext(context.Background(), text)
				if err != nil {
					t.Errorf("%s %s: %v", path, name, err)
					continue
				}
				st.Close()
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
