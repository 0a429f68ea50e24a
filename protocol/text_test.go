package protocol

import (
	"strings"
	"testing"
)

func TestPrintable(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"plain text, 1-2", "plain text, 1-2"},
		{"café ünïcode 日本", "café ünïcode 日本"},
		{"a\nb\tc\rd", `a\nb\tc\rd`},
		{"\x1b]0;pwned\x07", `\x1b]0;pwned\a`},
		{"\x1b[31mred", `\x1b[31mred`},
		{"c1 \u0085 \u009b", `c1 \u0085 \u009b`},
		{"bidi \u202e", `bidi \u202e`},
		{"latin1 caf\xe9", `latin1 caf\xe9`},
		{"del \x7f nul \x00", `del \x7f nul \x00`},
		{`back\slash`, `back\slash`},
	}
	for _, tt := range tests {
		if got := Printable(tt.in); got != tt.want {
			t.Errorf("Printable(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestCheckText(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in, err string
	}{
		{"node-1.example.org", ""},
		{"hôte", ""},
		{"a\nb", "control character"},
		{"\x1b]0;x\x07", "control character"},
		{"x\u0085", "control character"},
		{"caf\xe9", "not valid UTF-8"},
		{strings.Repeat("h", 300), "300 bytes; the limit is 256"},
	}
	for _, tt := range tests {
		err := CheckText("host", tt.in, 256)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("CheckText(%q) = %v, want nil", tt.in, err)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err) || !IsCode(err, CodeBadRequest)):
			t.Errorf("CheckText(%q) = %v, want a bad_request saying %q", tt.in, err, tt.err)
		case err != nil && strings.ContainsAny(err.Error(), "\n\x1b\x07"):
			t.Errorf("CheckText's error %q carries a control character", err)
		}
	}
}
