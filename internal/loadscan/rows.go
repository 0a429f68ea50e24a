// Package loadscan reads millions of rows at a load: each query scanned
// through the SQLite driver on a reader connection of its own, ahead of
// the caller by a few batches, its rows decoded into typed values.
//
// database/sql's Scan converts each column by reflection, and an int64
// into an int32 by formatting and parsing it: a third of a restart's CPU
// at 2,000,000 jobs. Raw reads the driver's values directly; a Pipe runs
// such a scan beside the caller, so SQLite steps one table while the
// caller builds its state from another (the machine has two cores and a
// load had one busy).
package loadscan

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
)

// Raw runs query on c and calls fn with each row's driver values (int64,
// float64, string, []byte or nil), valid only during the call.
func Raw(ctx context.Context, c *sql.Conn, query string, ncol int, fn func(row []driver.Value) error) error {
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

// Int is an integer column's value; NULL is 0 and ok false.
func Int(v driver.Value) (n int64, ok bool, err error) {
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

// Float is a real column's value; NULL is 0.
func Float(v driver.Value) (float64, error) {
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

// Text is a text column's value; NULL is "".
func Text(v driver.Value) (string, error) {
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

// Batch is the rows a Pipe hands over at a time; Depth batches may wait,
// so the reader runs ahead by at most that many rows.
const (
	Batch = 4096
	Depth = 4
)

// Source is where pipes read: the read pool, and a statement each reader
// runs once its scan is done.
type Source struct {
	DB *sql.DB
	// Release, if not "", runs on a reader after a whole scan: it goes
	// back to the pool with its page cache full of the table scanned, MBs
	// a connection, which "PRAGMA shrink_memory" gives back.
	Release string
}

// Pipe scans a query on its own connection in a goroutine, decoding rows
// into Ts handed to the consumer (Each) in batches, in the query's order.
type Pipe[T any] struct {
	batches chan []T
	free    chan []T
	cancel  context.CancelFunc
	done    chan struct{}
	err     error // the scan's, once done is closed
}

// Start starts scanning query, whose rows have ncol columns, on a
// connection of src. decode fills a T from a row's values. The pipe reads
// the database as committed when it starts: the caller must have nothing
// of the queried tables uncommitted on its own connection.
func Start[T any](ctx context.Context, src Source, query string, ncol int, decode func(row []driver.Value, t *T) error) *Pipe[T] {
	ctx, cancel := context.WithCancel(ctx)
	p := &Pipe[T]{
		batches: make(chan []T, Depth),
		free:    make(chan []T, Depth+2),
		cancel:  cancel,
		done:    make(chan struct{}),
	}
	go func() {
		defer close(p.done)
		defer close(p.batches)
		p.err = p.scan(ctx, src, query, ncol, decode)
	}()
	return p
}

func (p *Pipe[T]) scan(ctx context.Context, src Source, query string, ncol int, decode func(row []driver.Value, t *T) error) error {
	c, err := src.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	batch := make([]T, 0, Batch)
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
			batch = make([]T, 0, Batch)
		}
		return nil
	}
	var zero T
	err = Raw(ctx, c, query, ncol, func(row []driver.Value) error {
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
	if err == nil && src.Release != "" {
		_, err = c.ExecContext(ctx, src.Release)
	}
	return err
}

// Each calls fn with every row in order, then returns the scan's error. On
// fn's error the scan is stopped and that error returned.
func (p *Pipe[T]) Each(fn func(t *T) error) error {
	for b := range p.batches {
		for i := range b {
			if err := fn(&b[i]); err != nil {
				p.Stop()
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

// Stop ends the scan, if still running, and waits for it; it may be
// called more than once and after Each.
func (p *Pipe[T]) Stop() {
	p.cancel()
	for range p.batches {
	}
	<-p.done
}
