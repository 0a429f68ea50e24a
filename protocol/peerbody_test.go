package protocol

import (
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
