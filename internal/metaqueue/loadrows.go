package metaqueue

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// Reading millions of rows at load. database/sql's Scan converts each
// column by reflection, and an int64 into an int32 by formatting and parsing
// it: a third of a restart's CPU at 2,000,000 jobs. rawRows reads the
// driver's values directly; rowPipe runs such a scan on a reader connection
// beside the core, so SQLite steps one table while the graph is built from
// another (the machine has two cores and a load had one busy).

// rawRows runs query on c and calls fn with each row's driver values (int64,
// float64, string, []byte or nil), valid only during the call.
func rawRows(ctx context.Context, c *sql.Conn, query string, ncol int, fn func(row []driver.Value) error) error {
	return c.Raw(func(dc any) error {
		q, ok := dc.(driver.QueryerContext)
		if !ok {
			return fmt.Errorf("load: the SQLite driver cannot query a raw connection (%T)", dc)
		}
		rows, err := q.QueryContext(ctx, query, nil)
		if err != nil {
			return err
		}
		if n := len(rows.Columns()); n != ncol {
			rows.Close()
			return fmt.Errorf("load: query returns %d columns, want %d", n, ncol)
		}
		row := make([]driver.Value, ncol)
		for {
			if err := rows.Next(row); err != nil {
				if errors.Is(err, io.EOF) {
					return rows.Close()
				}
				rows.Close()
				return err
			}
			if err := fn(row); err != nil {
				rows.Close()
				return err
			}
		}
	})
}

// valInt is an integer column's value; NULL is 0 and ok false.
func valInt(v driver.Value) (n int64, ok bool, err error) {
	switch v := v.(type) {
	case int64:
		return v, true, nil
	case nil:
		return 0, false, nil
	case float64:
		if v == float64(int64(v)) {
			return int64(v), true, nil
		}
	}
	return 0, false, fmt.Errorf("load: %v (%T) is not an integer", v, v)
}

// valFloat is a real column's value; NULL is 0.
func valFloat(v driver.Value) (float64, error) {
	switch v := v.(type) {
	case float64:
		return v, nil
	case int64:
		return float64(v), nil
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("load: %v (%T) is not a number", v, v)
}

// valText is a text column's value; NULL is "".
func valText(v driver.Value) (string, error) {
	switch v := v.(type) {
	case string:
		return v, nil
	case []byte:
		return string(v), nil
	case nil:
		return "", nil
	}
	return "", fmt.Errorf("load: %v (%T) is not text", v, v)
}

// pipeBatch is the rows a rowPipe hands over at a time; pipeDepth batches
// may wait, so the reader runs ahead by at most that many rows.
const (
	pipeBatch = 4096
	pipeDepth = 4
)

// rowPipe scans a query on its own connection in a goroutine, decoding rows
// into Ts handed to the consumer (each) in batches, in the query's order.
type rowPipe[T any] struct {
	batches chan []T
	free    chan []T
	cancel  context.CancelFunc
	done    chan struct{}
	err     error // the scan's, once done is closed
}

// startPipe starts scanning query, whose rows have ncol columns, on a
// connection of db. decode fills a T from a row's values. The pipe reads the
// database as committed when it starts: the caller must have nothing of the
// queried tables uncommitted on its own connection.
func startPipe[T any](ctx context.Context, db *sql.DB, query string, ncol int, decode func(row []driver.Value, t *T) error) *rowPipe[T] {
	ctx, cancel := context.WithCancel(ctx)
	p := &rowPipe[T]{
		batches: make(chan []T, pipeDepth),
		free:    make(chan []T, pipeDepth+2),
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	go func() {
		defer close(p.done)
		defer close(p.batches)
		p.err = p.scan(ctx, db, query, ncol, decode)
	}()
	return p
}

func (p *rowPipe[T]) scan(ctx context.Context, db *sql.DB, query string, ncol int, decode func(row []driver.Value, t *T) error) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	batch := make([]T, 0, pipeBatch)
	send := func() error {
		select {
		case p.batches <- batch:
		case <-ctx.Done():
			return ctx.Err()
		}
		select {
		case batch = <-p.free:
			batch = batch[:0]
		default:
			batch = make([]T, 0, pipeBatch)
		}
		return nil
	}
	var zero T
	err = rawRows(ctx, c, query, ncol, func(row []driver.Value) error {
		batch = append(batch, zero)
		if err := decode(row, &batch[len(batch)-1]); err != nil {
			return err
		}
		if len(batch) == cap(batch) {
			return send()
		}
		return nil
	})
	if err == nil && len(batch) > 0 {
		err = send()
	}
	if err == nil {
		// The reader goes back to the pool with its page cache full of
		// the table scanned: give that back (MBs a connection).
		_, err = c.ExecContext(ctx, connSQL.Get("ShrinkMemory"))
	}
	return err
}

// each calls fn with every row in order, then returns the scan's error. On
// fn's error the scan is stopped and that error returned.
func (p *rowPipe[T]) each(fn func(t *T) error) error {
	for b := range p.batches {
		for i := range b {
			if err := fn(&b[i]); err != nil {
				p.stop()
				return err
			}
		}
		select {
		case p.free <- b:
		default:
		}
	}
	<-p.done
	p.cancel()
	return p.err
}

// stop ends the scan, if still running, and waits for it; it may be
// called more than once and after each.
func (p *rowPipe[T]) stop() {
	p.cancel()
	for range p.batches {
	}
	<-p.done
}
