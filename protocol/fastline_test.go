package protocol

import (
	"reflect"
	"testing"
)

// slowJobLine is parseJobLine without the fast path.
func slowJobLine(line []byte) (JobSpec, error) {
	return parseJobLineWith(line, false)
}

func TestFastJobLine(t *testing.T) {
	for _, tc := range []struct {
		line string
		fast bool // the fast path takes it
	}{
		{`{"target":"t1","command":"echo hi"}`, true},
		{`{ "target" : "t1" , "prereqs" : [ "a" , "b" ] , "command":"x", "queue":"q", "est":2.5, "cwd":"/tmp" } `, true},
		{` {"target":"t1","command":"x"}`, false}, // callers trim leading space
		{`{"target":"t","command":"x","prereqs":[]}`, true},
		{`{"target":"t","command":"x","est":0}`, true},
		{`{"target":"t","command":"x","est":-1}`, true},
		{`{}`, true},
		{`{"target":"t","command":"a\"b"}`, false}, // escape
		{`{"target":"t","command":"x","est":1e3}`, false},
		{`{"target":"t","command":"x","est":01}`, false},
		{`{"target":"t","command":"x","prereqs":null}`, false},
		{`{"target":"t","comand":"x"}`, false},    // unknown key
		{`{"target":"t","command":"x"} x`, false}, // trailing garbage
		{`{"target":"t","command":"x",}`, false},  // trailing comma
		{`{"target":"t","command":"é"}`, true},
		{"{\"target\":\"t\",\"command\":\"\xff\"}", false},                        // invalid UTF-8
		{`{"target":"t","command":"x","inputs":[{"path":"/a","size":1}]}`, false}, // files: encoding/json's
		{`{"target":"t","command":"x","outputs":[]}`, false},
	} {
		_, ok := fastJobLine([]byte(tc.line))
		if ok != tc.fast {
			t.Errorf("fastJobLine(%s) ok = %v, want %v", tc.line, ok, tc.fast)
		}
		if ok {
			checkSame(t, []byte(tc.line))
		}
	}
}

func checkSame(t *testing.T, line []byte) {
	t.Helper()
	fast, ok := fastJobLine(line)
	if !ok {
		return
	}
	slow, err := slowJobLine(line)
	if err != nil {
		t.Fatalf("fast path accepted %q but encoding/json says %v", line, err)
	}
	if !reflect.DeepEqual(fast, slow) {
		t.Fatalf("%q: fast %#v, encoding/json %#v", line, fast, slow)
	}
}

// FuzzFastJobLine checks that the fast path agrees with encoding/json on
// every line it accepts.
func FuzzFastJobLine(f *testing.F) {
	for _, s := range []string{
		`{"target":"t1","command":"echo hi"}`,
		`{"target":"t","prereqs":["a","b"],"command":"x","queue":"q","est":2.5,"cwd":"/tmp"}`,
		`{"target":"t","target":"u","prereqs":["a"],"prereqs":[],"command":"x"}`,
		`{"est":-0.5}`,
		`{"target":"t","command":"x","inputs":[{"path":"/a","size":10}],"outputs":[{"path":"/b"}]}`,
		`{"target":"t","command":"x","inputs":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkSame(t, line)
	})
}
