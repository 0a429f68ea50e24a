package sqlfile

// Names buffers rows (id, name) with consecutive ids for a statement
// that inserts them from one JSON array of the names (json_each): one
// bound value, however many rows, not two per row.
type Names struct {
	first int64
	names []byte // a JSON array, unterminated
	n     int
}

// Add buffers row (id, name). It adds nothing and returns false if id
// does not follow the buffered rows' (Take them first).
func (b *Names) Add(id int64, name string) bool {
	switch {
	case b.n == 0:
		b.first = id
		b.names = append(b.names[:0], '[')
	case id != b.first+int64(b.n):
		return false
	default:
		b.names = append(b.names, ',')
	}
	b.names = appendJSONString(b.names, name)
	b.n++
	return true
}

// Len is the number of rows buffered.
func (b *Names) Len() int { return b.n }

// Take returns the first row's id and the rows' names as a JSON array (text:
// a blob would be JSONB), and empties the buffer.
func (b *Names) Take() (first int64, names string) {
	b.names = append(b.names, ']')
	b.n = 0
	return b.first, string(b.names)
}

// appendJSONString appends s as a JSON string. Names are printable and
// have no spaces; quotes and backslashes are escaped, and control
// characters too should one ever get here.
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
