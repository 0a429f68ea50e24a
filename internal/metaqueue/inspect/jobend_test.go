package inspect

import (
	"database/sql"
	"errors"
	"testing"
	"time"
)

// row is a scanned row of fixed values, in the JobEnd query's order.
type row struct {
	vals []any
	err  error
}

func (r row) Scan(dest ...any) error {
	if r.err != nil {
		return r.err
	}
	for i, d := range dest {
		switch d := d.(type) {
		case *string:
			*d = r.vals[i].(string)
		case *int:
			*d = r.vals[i].(int)
		case *sql.NullInt64:
			*d = r.vals[i].(sql.NullInt64)
		case *sql.NullString:
			*d = r.vals[i].(sql.NullString)
		case *sql.NullFloat64:
			*d = r.vals[i].(sql.NullFloat64)
		default:
			return errors.New("unexpected destination")
		}
	}
	return nil
}

func TestJobEnd(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	null := sql.NullInt64{}
	at := func(t time.Time) sql.NullInt64 { return sql.NullInt64{Int64: t.UnixMicro(), Valid: true} }
	nf := func(f float64) sql.NullFloat64 { return sql.NullFloat64{Float64: f, Valid: true} }

	end, err := JobEnd(row{vals: []any{"D", sql.NullInt64{Int64: 3, Valid: true}, sql.NullString{String: "exit 3", Valid: true},
		2, "local", "h1", at(start), at(start.Add(1500 * time.Millisecond)), nf(1.25), nf(0.5), sql.NullInt64{Int64: 4096, Valid: true}}}, 7)
	if err != nil {
		t.Fatal(err)
	}
	if end.ID != 7 || end.State != "D" || end.Reason != "exit 3" || end.Attempt != 2 || end.Site != "local" || end.Host != "h1" {
		t.Errorf("end = %+v", end)
	}
	if end.Exit == nil || *end.Exit != 3 {
		t.Errorf("exit = %v, want 3", end.Exit)
	}
	if end.Started != Micros(at(start)) || end.Finished == "" {
		t.Errorf("times = %q, %q", end.Started, end.Finished)
	}
	if end.Usage == nil || end.Usage.CPUUser != 1.25 || end.Usage.MaxRSS != 4096 {
		t.Errorf("usage = %+v", end.Usage)
	}

	// Never started: no exit, no times, no usage.
	end, err = JobEnd(row{vals: []any{"X", null, sql.NullString{}, 0, "", "", null, null, sql.NullFloat64{}, sql.NullFloat64{}, null}}, 8)
	if err != nil {
		t.Fatal(err)
	}
	if end.Exit != nil || end.Usage != nil || end.Started != "" || end.Finished != "" {
		t.Errorf("unstarted end = %+v", end)
	}

	if _, err := JobEnd(row{err: sql.ErrNoRows}, 9); !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("missing row: %v, want sql.ErrNoRows", err)
	}
}
