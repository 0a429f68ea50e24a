package columns

import (
	"bytes"
	"fmt"
	"testing"
	"text/tabwriter"
)

// A Writer writes what a tabwriter with padding 1 writes of the same
// table (lines of the same cells), however it is cut into writes.
func TestColumnsAsTabwriter(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"ID\tQ\tCOMMAND\n1\tdefault\techo a\tb\n1000\tq\tx\n",
		"é\tx\nab\ty\n", // widths in runes, as a tabwriter counts them
		"no tab\n",
	} {
		var want bytes.Buffer
		tw := tabwriter.NewWriter(&want, 0, 8, 1, ' ', 0)
		tw.Write([]byte(text))
		tw.Flush()
		for _, cut := range []int{1, 3, len(text)} {
			var got bytes.Buffer
			c := New(&got)
			for i := 0; i < len(text); i += cut {
				c.Write([]byte(text[i:min(i+cut, len(text))]))
			}
			if err := c.Flush(); err != nil {
				t.Fatal(err)
			}
			if got.String() != want.String() {
				t.Errorf("%q in writes of %d:\ngot\n%s\nwant\n%s", text, cut, got.String(), want.String())
			}
		}
	}
	// A flush in the middle keeps the widths: the rows after it are as
	// wide as those before, at least.
	var got bytes.Buffer
	c := New(&got)
	fmt.Fprint(c, "a-long-cell\tx\n")
	c.Flush()
	fmt.Fprint(c, "b\ty\n")
	c.Flush()
	if want := "a-long-cell x\nb           y\n"; got.String() != want {
		t.Errorf("after a flush: got %q, want %q", got.String(), want)
	}
}
