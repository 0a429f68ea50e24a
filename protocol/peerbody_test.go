package protocol

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

func TestCheckObjects(t *testing.T) {
	for _, tc := range []struct {
		body string
		max  int
		ok   bool
	}{
		{`{}`, 1, true},
		{`{"a":{}}`, 1, false},
		{`{"a":"{{{{"}`, 1, true},       // braces in a string are not objects
		{`{"a":"\"{{{{"}`, 1, true},     // nor after an escaped quote
		{`{"a":"\\"}` + `{}`, 1, false}, // an escaped backslash ends no string
		{`[` + strings.Repeat(`{},`, 10) + `{}]`, 11, true},
		{`[` + strings.Repeat(`{},`, 11) + `{}]`, 11, false},
		{`{"a":"unterminated {`, 1, true}, // left for the decoder
		{``, 0, true},
	} {
		err := CheckObjects([]byte(tc.body), tc.max)
		if (err == nil) != tc.ok {
			t.Errorf("CheckObjects(%q, %d) = %v, want ok %v", tc.body, tc.max, err, tc.ok)
		}
	}
}

// FuzzCheckObjects: on valid JSON, CheckObjects counts exactly the
// objects encoding/json reads (its '{' tokens).
func FuzzCheckObjects(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":"{\"}"}`, `[{},{"b":[{}]}]`, `"\\"`, `{"a":"\\\"{"}`, `{"\u007b":1}`, `{"a":{},"a":{}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) {
			return
		}
		n := 0
		d := json.NewDecoder(bytes.NewReader(b))
		for {
			tok, err := d.Token()
			if err != nil {
				break
			}
			if tok == json.Delim('{') {
				n++
			}
		}
		if err := CheckObjects(b, n); err != nil {
			t.Fatalf("%q: %d objects, refused at that bound: %v", b, n, err)
		}
		if n > 0 && CheckObjects(b, n-1) == nil {
			t.Fatalf("%q: %d objects, accepted with a bound of %d", b, n, n-1)
		}
	})
}
