package inspect

import (
	"context"
	"path/filepath"

	"github.com/mq-hpc/mq/protocol"
)

// streamed returns where job id's attempts' outputs lie in stream files:
// by attempt, stdout then stderr (nil: not streamed, or empty).
func (r *Reader) streamed(ctx context.Context, id int64) (map[int][2]*protocol.StreamExtent, error) {
	rows, err := r.db.QueryContext(ctx, queries.Get("Streamed"), id)
	if err != nil {
		return nil, err
	}
	var m map[int][2]*protocol.StreamExtent
	for rows.Next() {
		var attempt, stream int
		var outDir, file string
		var e protocol.StreamExtent
		if err := rows.Scan(&attempt, &stream, &outDir, &file, &e.Last, &e.Bytes, &e.Cut); err != nil {
			rows.Close()
			return nil, err
		}
		if outDir == "" || stream < 0 || stream > 1 {
			continue // its placeholder's directory is not known: nowhere to read
		}
		if r.outputDir != "" && filepath.Clean(outDir) != filepath.Clean(r.outputDir) {
			// A remote placeholder's: read the CLS's copy, shipped under
			// the same name before the report (op output.ship).
			outDir = r.outputDir
		}
		e.Path, e.Attempt = filepath.Join(outDir, protocol.StreamDir, file), attempt
		if m == nil {
			m = map[int][2]*protocol.StreamExtent{}
		}
		both := m[attempt]
		both[stream] = &e
		m[attempt] = both
	}
	return m, closeRows(rows)
}

// addStreamed fills d's stream extents: its current attempt's (attempt,
// the one its Stdout names) and its history's.
func (r *Reader) addStreamed(ctx context.Context, d *protocol.JobDetail, attempt int) error {
	m, err := r.streamed(ctx, d.ID)
	if err != nil || m == nil {
		return err
	}
	// A streamed output has no per-job copy on the CLS host: readers go
	// to the stream (the copy's, for a remote placeholder).
	if attempt > 0 {
		d.StdoutStream, d.StderrStream = m[attempt][0], m[attempt][1]
		d.StdoutCopy, d.StderrCopy = noCopy(d.StdoutCopy, d.StdoutStream), noCopy(d.StderrCopy, d.StderrStream)
	}
	for i := range d.History {
		a := &d.History[i]
		a.StdoutStream, a.StderrStream = m[a.Attempt][0], m[a.Attempt][1]
		a.StdoutCopy, a.StderrCopy = noCopy(a.StdoutCopy, a.StdoutStream), noCopy(a.StderrCopy, a.StderrStream)
	}
	return nil
}

// noCopy is cp unless the output was streamed.
func noCopy(cp string, ext *protocol.StreamExtent) string {
	if ext != nil {
		return ""
	}
	return cp
}
