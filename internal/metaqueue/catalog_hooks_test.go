package metaqueue

import (
	"context"
	"os"
	"testing"

	"github.com/mq-hpc/mq/internal/metaqueue/catalog"
	"github.com/mq-hpc/mq/internal/sqlfile"
)

// TestCatalogQueries prepares every query of the catalog's SQL file
// against the schema the migrations make: a typo or a column the schema
// lost fails here, not in a staging run.
func TestCatalogQueries(t *testing.T) {
	src, err := os.ReadFile("catalog/catalog.sql")
	if err != nil {
		t.Fatal(err)
	}
	q, err := sqlfile.Parse("catalog.sql", string(src))
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	err = e.s.do(context.Background(), func() error {
		for _, name := range q.Names() {
			st, err := e.s.w.PrepareContext(context.Background(), q.Get(name))
			if err != nil {
				t.Errorf("%s: %v", name, err)
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

// addReplica records a copy of path at p, in the batch's transaction,
// without the checks of a user's files.add (the copy index's tests).
func (s *Store) addReplica(path string, p catalog.Place, size int64, sha string) error {
	if err := s.begin(); err != nil {
		return err
	}
	isNew, err := s.cat.AddReplica(context.Background(), s.w, path, p, size, sha, s.now())
	if err != nil {
		return fatalError{err}
	}
	return s.catalogChanged(catalog.Change{Arrived: &catalog.Arrival{Path: path, At: p, Size: size, New: isNew}})
}
