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
		{`{"target":"t","command":"x","cpus":4,"mem":"8G","gpus":1}`, true},
		{`{"target":"t","command":"x","cpus":"auto","mem":"auto"}`, true},
		{`{"target":"t","command":"x","mem":500,"cpus":"2"}`, true},
		{`{"target":"t","command":"x","cpus":0}`, false},   // an error: the slow path's words
		{`{"target":"t","command":"x","cpus":4.5}`, false}, // not a count
		{`{"target":"t","command":"x","mem":"8X"}`, false},
		{`{"target":"t","command":"x","gpus":"auto"}`, false},
		{`{"target":"t","command":"x","cpus":2,"cpus_auto":true}`, false}, // wire keys: encoding/json's
		{`{"target":"t","command":"x","resources":{"lic":1}}`, false},
		{`{"target":"t","command":"x","env":{"MQ_ARRAY_INDEX":"7"}}`, true},
		{`{"env": { "A" : "1" , "B":"é", "A":"2" } ,"target":"t","command":"x"}`, true},
		{`{"target":"t","command":"x","env":{}}`, true},
		{`{"env":{"A":"1"},"env":{"B":"2"},"command":"x"}`, true}, // merged, as encoding/json does
		{`{"target":"t","command":"x","env":null}`, false},
		{`{"target":"t","command":"x","env":{"A":1}}`, false},
		{`{"target":"t","command":"x","env":{"A":"a\"b"}}`, false}, // escape
		{`{"target":"t","command":"x","env":{"A":"1",}}`, false},
		{`{"target":"t","command":"x","env":{"A"}}`, false},
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
		`{"target":"t","command":"x","cpus":4,"mem":"8G","gpus":1,"cpus":"auto","mem":1.5}`,
		`{"cpus":"1","gpus":64,"mem":"1.5t"}`,
		`{"target":"t","command":"x","env":{"MQ_ARRAY_INDEX":"7","A":"","A":"b"}}`,
		`{"env":{},"env":{"B":"2"},"env":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		checkSame(t, line)
	})
}

// BenchmarkJobLineResources compares a job-file line that asks for
// resources on the fast path and on encoding/json's.
func BenchmarkJobLineResources(b *testing.B) {
	line := []byte(`{"target":"t1","command":"blastp -num_threads 4 -query q.fa","cpus":4,"mem":"8G"}`)
	b.Run("fast", func(b *testing.B) {
		for b.Loop() {
			if _, err := parseJobLineWith(line, true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("slow", func(b *testing.B) {
		for b.Loop() {
			if _, err := parseJobLineWith(line, false); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkJobLineEnv compares a job-file line with its own environment
// (an array member's, as mqsub -f files write them) on the fast path and
// on encoding/json's.
func BenchmarkJobLineEnv(b *testing.B) {
	line := []byte(`{"target":"sim","command":"simulate --case 17","env":{"MQ_ARRAY_INDEX":"17","SEED":"42"}}`)
	for _, fast := range []bool{true, false} {
		b.Run(map[bool]string{true: "fast", false: "slow"}[fast], func(b *testing.B) {
			for b.Loop() {
				if _, err := parseJobLineWith(line, fast); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
