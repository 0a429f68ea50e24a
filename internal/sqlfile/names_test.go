package sqlfile

import (
	"encoding/json"
	"slices"
	"testing"
)

// TestNames: buffered names come back as a JSON array that decodes to
// them (quotes, backslashes and control characters escaped), with the
// first id; an id out of sequence is refused; Take empties the buffer.
func TestNames(t *testing.T) {
	for _, c := range []struct {
		name  string
		first int64
		names []string
	}{
		{"one", 1, []string{"a"}},
		{"plain", 7, []string{"a/b.out", "c", "d-e_f"}},
		{"escaped", 100, []string{`q"uote`, `back\slash`, "tab\tnl\n\x01", "é"}},
	} {
		var b Names
		for i, n := range c.names {
			if !b.Add(c.first+int64(i), n) {
				t.Fatalf("%s: Add(%d) refused", c.name, c.first+int64(i))
			}
		}
		if b.Add(c.first+int64(len(c.names))+1, "gap") {
			t.Errorf("%s: an id out of sequence was added", c.name)
		}
		if b.Len() != len(c.names) {
			t.Errorf("%s: Len %d, want %d", c.name, b.Len(), len(c.names))
		}
		first, text := b.Take()
		var got []string
		if err := json.Unmarshal([]byte(text), &got); err != nil {
			t.Fatalf("%s: %q: %v", c.name, text, err)
		}
		if first != c.first || !slices.Equal(got, c.names) {
			t.Errorf("%s: got %d %q, want %d %q", c.name, first, got, c.first, c.names)
		}
		if b.Len() != 0 || !b.Add(5, "next") {
			t.Errorf("%s: Take left the buffer non-empty", c.name)
		}
	}
}
