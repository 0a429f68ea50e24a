package sqlfile

import "database/sql"

// Batch buffers the values of rows for a multi-row statement (MultiRow)
// of Rows rows of Width values each: a full batch goes in that one
// statement, a last partial one row by row.
type Batch struct {
	Width, Rows int
	args        []any
}

// Add buffers one row's values and says whether the batch is full (Flush
// it).
func (b *Batch) Add(row ...any) (full bool) {
	b.args = append(b.args, row...)
	return len(b.args) == b.Width*b.Rows
}

// Put buffers one row's values and flushes the batch once full.
func (b *Batch) Put(many, one *sql.Stmt, row ...any) error {
	if b.Add(row...) {
		return b.Flush(many, one)
	}
	return nil
}

// Flush runs the buffered rows, all at once on many if the batch is
// full, else one by one on one, and empties the batch.
func (b *Batch) Flush(many, one *sql.Stmt) error {
	var err error
	if len(b.args) == b.Width*b.Rows {
		_, err = many.Exec(b.args...)
	} else {
		for i := 0; i < len(b.args) && err == nil; i += b.Width {
			_, err = one.Exec(b.args[i : i+b.Width]...)
		}
	}
	b.args = b.args[:0]
	return err
}
