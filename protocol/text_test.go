package protocol

import (
	"encoding/base64"
	"encoding/json"
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

// Commands that are not UTF-8 keep their exact bytes: as command_bytes on
// the wire (JSON would turn 0xE9 into U+FFFD) and in job files; a job-file
// line with raw non-UTF-8 bytes is refused naming the line and column
// rather than read as another command; names must be UTF-8.
func TestCommandBytes(t *testing.T) {
	t.Parallel()
	const cmd = "ls caf\xe9"
	js := JobSpec{Target: "t", Command: cmd}
	if err := ValidateSpec(&js); err != nil {
		t.Fatal(err)
	}
	EncodeCommand(&js)
	b, err := json.Marshal(Submit{Jobs: []JobSpec{js}})
	if err != nil {
		t.Fatal(err)
	}
	var got Submit
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if err := ValidateSpec(&got.Jobs[0]); err != nil || got.Jobs[0].Command != cmd {
		t.Fatalf("after the wire: %q, %v; want %q", got.Jobs[0].Command, err, cmd)
	}

	file := "{\"target\":\"a\",\"command\":\"true\"}\n{\"target\":\"b\",\"command\":\"" + cmd + "\"}\n"
	err = ReadJobFile(strings.NewReader(file), JobSpec{}, func(int, JobSpec) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "line 2: byte 0xe9 at column 32 is not UTF-8") || !strings.Contains(err.Error(), "command_bytes") {
		t.Errorf("raw Latin-1 line: %v; want line 2 refused, naming the byte, its column and command_bytes", err)
	}
	// As Python's json.dumps writes os.listdir's "caf\udce9": encoding/json
	// would read U+FFFD and run another command.
	for _, tt := range []struct{ line, bad string }{
		{`{"target":"a","command":"ls caf\udce9"}`, `\udce9 at column 32`},
		{`{"target":"a","command":"ls \ud83d x"}`, `\ud83d at column 29`},
		{`{"target":"a","command":"ls \ud83d\ud83d"}`, `\ud83d at column 29`},
		{`{"target":"a","command":"true","env":{"F":"\udc80"}}`, `\udc80 at column 44`},
	} {
		err := ReadJobFile(strings.NewReader(tt.line+"\n"), JobSpec{}, func(int, JobSpec) error { return nil })
		if err == nil || !strings.Contains(err.Error(), "line 1: "+tt.bad+" is half a UTF-16 surrogate pair") || !strings.Contains(err.Error(), "command_bytes") {
			t.Errorf("%s: %v; want it refused naming %s and command_bytes", tt.line, err, tt.bad)
		}
	}
	for _, line := range []string{`{"target":"a","command":"echo \ud83d\ude00"}`, `{"target":"a","command":"echo \\ud800 \\\\ud800"}`} {
		if err := ReadJobFile(strings.NewReader(line+"\n"), JobSpec{}, func(int, JobSpec) error { return nil }); err != nil {
			t.Errorf("%s: %v", line, err)
		}
	}
	file = `{"target":"b","command_bytes":"` + base64.StdEncoding.EncodeToString([]byte(cmd)) + `"}` + "\n"
	var specs []JobSpec
	if err := ReadJobFile(strings.NewReader(file), JobSpec{}, func(_ int, js JobSpec) error { specs = append(specs, js); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(specs) != 1 || specs[0].Command != cmd || specs[0].CommandBytes != nil {
		t.Errorf("command_bytes line read as %+v, want command %q", specs, cmd)
	}
	both := JobSpec{Target: "t", Command: "x", CommandBytes: []byte("y")}
	if err := ValidateSpec(&both); err == nil {
		t.Error("command and command_bytes together were accepted")
	}
	for _, name := range []string{"caf\xe9", "t\u0085", "t\u202e"} {
		if err := ValidateSpec(&JobSpec{Target: name, Command: "x"}); err == nil {
			t.Errorf("target %q accepted", name)
		}
		if err := ValidateSpec(&JobSpec{Queue: name, Target: "t", Command: "x"}); err == nil {
			t.Errorf("queue %q accepted", name)
		}
	}
	if err := ValidateSpec(&JobSpec{Target: "café", Command: "x"}); err != nil {
		t.Errorf("a UTF-8 target was refused: %v", err)
	}
	if err := ValidateSpec(&JobSpec{Target: "t", Command: "x", Cwd: "/caf\xe9"}); err == nil || !strings.Contains(err.Error(), "not valid UTF-8") {
		t.Errorf("a Latin-1 working directory: %v", err)
	}
}
