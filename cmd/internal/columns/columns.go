// Package columns aligns the tab-separated cells of a listing in
// columns, as text/tabwriter does, over a listing that comes in many
// frames and requests, in bounded memory.
package columns

import (
	"bytes"
	"io"
	"strings"
	"unicode/utf8"
)

// maxHeld is how many rows a Writer holds before it writes them: enough
// for any listing users read (a hundred frames of jobs), few enough
// that memory stays bounded for mqstat -a of millions.
const maxHeld = 100_000

// Writer aligns a listing's tab-separated cells in columns, as a
// tabwriter with padding 1 does, over the whole listing however many
// frames and requests it comes in. A tabwriter aligns what each Flush
// holds alone, so a listing flushed per frame or per request (mqstat
// 1 2 99-100: the ids, then the range) printed its second block in
// columns of its own. Rows are held until Flush, or maxHeld of them;
// the widths of rows already written are the least the later ones get,
// so only a listing longer than maxHeld rows whose later cells are
// wider is aligned in more than one block. The text after a line's last
// tab is not a column, as in a tabwriter; unlike one, a column is as
// wide over every line (a tabwriter's stops at a line without it), which
// a table whose lines have the same cells does not see.
type Writer struct {
	w       io.Writer
	partial []byte   // a line not ended yet
	rows    []string // lines held, without their newline
	widths  []int
}

// New returns a Writer to w.
func New(w io.Writer) *Writer { return &Writer{w: w} }

// Write takes text of tab-separated cells and newline-ended lines.
func (c *Writer) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			c.partial = append(c.partial, p...)
			break
		}
		c.rows = append(c.rows, string(c.partial)+string(p[:i]))
		c.partial = c.partial[:0]
		p = p[i+1:]
		if len(c.rows) >= maxHeld {
			if err := c.Flush(); err != nil {
				return n - len(p), err
			}
		}
	}
	return n, nil
}

// Flush writes the rows held, aligned with every row before them.
func (c *Writer) Flush() error {
	for _, r := range c.rows {
		cells := strings.Split(r, "\t")
		for i, cell := range cells[:len(cells)-1] {
			if i == len(c.widths) {
				c.widths = append(c.widths, 0)
			}
			c.widths[i] = max(c.widths[i], utf8.RuneCountInString(cell)+1)
		}
	}
	var b strings.Builder
	for _, r := range c.rows {
		cells := strings.Split(r, "\t")
		for i, cell := range cells[:len(cells)-1] {
			b.WriteString(cell)
			b.WriteString(strings.Repeat(" ", c.widths[i]-utf8.RuneCountInString(cell)))
		}
		b.WriteString(cells[len(cells)-1])
		b.WriteByte('\n')
		if b.Len() >= 64<<10 {
			if _, err := io.WriteString(c.w, b.String()); err != nil {
				return err
			}
			b.Reset()
		}
	}
	c.rows = c.rows[:0]
	_, err := io.WriteString(c.w, b.String())
	return err
}
