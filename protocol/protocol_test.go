package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mq-hpc/mq/job"
)

func TestReaderLines(t *testing.T) {
	t.Parallel()
	in := "a\n\n  \r\nb\r\n{\"x\":1}\n\n"
	r := NewReader(strings.NewReader(in))
	for _, want := range []string{"a", "b", `{"x":1}`} {
		line, err := r.ReadLine()
		if err != nil || string(line) != want {
			t.Fatalf("ReadLine = %q, %v; want %q", line, err, want)
		}
	}
	if _, err := r.ReadLine(); err != io.EOF {
		t.Fatalf("at end: %v, want io.EOF", err)
	}
}

func TestReaderOneByteReads(t *testing.T) {
	t.Parallel()
	r := NewReader(iotest.OneByteReader(strings.NewReader("first\nsecond\n")))
	for _, want := range []string{"first", "second"} {
		line, err := r.ReadLine()
		if err != nil || string(line) != want {
			t.Fatalf("ReadLine = %q, %v; want %q", line, err, want)
		}
	}
}

func TestReaderTruncatedLine(t *testing.T) {
	t.Parallel()
	r := NewReader(strings.NewReader("ok\npartial"))
	if _, err := r.ReadLine(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.ReadLine(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a line cut by EOF gave %v, want io.ErrUnexpectedEOF", err)
	}
}

func TestReaderFrameLimit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		size    int
		tooBig  bool
		newline bool
	}{
		{"just under", MaxFrame - 1, false, true},
		{"exactly MaxFrame", MaxFrame, false, true},
		{"one over", MaxFrame + 1, true, true},
		{"far over", 3 * MaxFrame, true, true},
		{"far over, no newline", 2 * MaxFrame, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			line := bytes.Repeat([]byte("x"), tc.size)
			in := append([]byte{}, line...)
			if tc.newline {
				in = append(in, '\n')
			}
			in = append(in, "next\n"...)
			r := NewReader(bytes.NewReader(in))
			got, err := r.ReadLine()
			if tc.tooBig {
				if !errors.Is(err, ErrFrameTooLarge) {
					t.Fatalf("%d-byte line: err %v, want ErrFrameTooLarge", tc.size, err)
				}
				return
			}
			if err != nil || len(got) != tc.size {
				t.Fatalf("%d-byte line: got %d bytes, %v", tc.size, len(got), err)
			}
			if got, err := r.ReadLine(); err != nil || string(got) != "next" {
				t.Fatalf("line after a large one: %q, %v", got, err)
			}
		})
	}
}

func TestReadRequestAndResponse(t *testing.T) {
	t.Parallel()
	var buf []byte
	var err error
	buf, err = AppendFrame(buf, Request{ID: 7, Op: OpSubmit.Name, Body: json.RawMessage(`{"jobs":[]}`)})
	if err != nil {
		t.Fatal(err)
	}
	buf, err = AppendFrame(buf, Response{ID: 7, More: true, Err: Errorf(CodeNotFound, "no\nsuch")})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(buf, []byte("\n")) != 2 {
		t.Fatalf("frames must be one line each: %q", buf)
	}
	r := NewReader(bytes.NewReader(buf))
	req, err := r.ReadRequest()
	if err != nil || req.ID != 7 || req.Op != OpSubmit.Name || string(req.Body) != `{"jobs":[]}` {
		t.Fatalf("ReadRequest = %+v, %v", req, err)
	}
	resp, err := r.ReadResponse()
	if err != nil || resp.ID != 7 || !resp.More || resp.Err == nil || resp.Err.Code != CodeNotFound || resp.Err.Msg != "no\nsuch" {
		t.Fatalf("ReadResponse = %+v, %v", resp, err)
	}
	if _, err := NewReader(strings.NewReader("{bad\n")).ReadResponse(); err == nil {
		t.Fatal("malformed response accepted")
	}
	if _, err := AppendFrame(nil, math.NaN()); err == nil {
		t.Fatal("AppendFrame of an unencodable value succeeded")
	}
}

func TestParseRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		ok      bool
		id      uint64
		op      string
		errHas  string
		keepsID bool // an error reply can still carry the request id
	}{
		{in: `{"id":1,"op":"hello","body":{"proto":1}}`, ok: true, id: 1, op: "hello"},
		{in: `{"op":"stat"}`, ok: true, op: "stat"},
		{in: `{"id":18446744073709551615,"op":"x"}`, ok: true, id: math.MaxUint64, op: "x"},
		{in: `{"id":3,"op":"x","extra":true}`, ok: true, id: 3, op: "x"},
		{in: `{"id":2}`, errHas: "request 2 has no op", keepsID: true, id: 2},
		{in: `{"id":2,"op":""}`, errHas: "has no op", keepsID: true, id: 2},
		{in: `{}`, errHas: "has no op", keepsID: true},
		{in: ``, errHas: "malformed request"},
		{in: `not json`, errHas: "invalid JSON at byte"},
		{in: `{"id":1,"op":"x"`, errHas: "malformed request"},
		{in: `{"id":"one","op":"x"}`, errHas: `field "id" must be uint64`},
		{in: `{"id":-1,"op":"x"}`, errHas: `field "id"`},
		{in: `{"id":1.5,"op":"x"}`, errHas: `field "id"`},
		{in: `{"id":1,"op":7}`, errHas: `field "op" must be string`},
		{in: `[1,2]`, errHas: "malformed request"},
		{in: `"hello"`, errHas: "malformed request"},
		{in: `null`, errHas: "has no op", keepsID: true},
		{in: `{"id":1,"op":"x"} {"id":2}`, errHas: "malformed request"},
		{in: "{\"id\":1,\"op\":\"x\xff\"}", ok: true, id: 1, op: "x\ufffd"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			req, err := ParseRequest([]byte(tc.in))
			if tc.ok {
				if err != nil || req.ID != tc.id || req.Op != tc.op {
					t.Fatalf("ParseRequest = %+v, %v", req, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseRequest accepted %q", tc.in)
			}
			if !IsCode(err, CodeBadRequest) {
				t.Fatalf("error %v is not bad_request", err)
			}
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("error %q does not say %q", err, tc.errHas)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q is not one line", err)
			}
			if tc.keepsID && (req == nil || req.ID != tc.id) {
				t.Fatalf("error reply would lose the id: %+v", req)
			}
		})
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	e := Errorf(CodeBadState, "job %d is %s", 4, "done")
	if e.Error() != "job 4 is done" || e.Code != CodeBadState {
		t.Fatalf("Errorf = %+v", e)
	}
	wrapped := fmt.Errorf("ctx: %w", e)
	if !IsCode(wrapped, CodeBadState) || IsCode(wrapped, CodeNotFound) {
		t.Fatal("IsCode does not see through wrapping")
	}
	if AsError(wrapped) != e {
		t.Fatal("AsError did not unwrap the protocol error")
	}
	plain := AsError(errors.New("disk full"))
	if plain.Code != CodeInternal || plain.Msg != "disk full" {
		t.Fatalf("AsError(plain) = %+v", plain)
	}
	if IsCode(errors.New("x"), CodeInternal) {
		t.Fatal("IsCode matched a plain error")
	}
}

func TestValidateSpec(t *testing.T) {
	t.Parallel()
	good := func() JobSpec { return JobSpec{Target: "t", Command: "echo hi"} }
	long := strings.Repeat("x", job.MaxNameBytes+1)
	manyPrereqs := make([]string, 10001)
	for i := range manyPrereqs {
		manyPrereqs[i] = fmt.Sprintf("p%d", i)
	}
	tests := []struct {
		name   string
		mod    func(*JobSpec)
		errHas string // "" = valid
	}{
		{"minimal", func(*JobSpec) {}, ""},
		{"full", func(js *JobSpec) {
			js.Queue, js.Cwd, js.Est, js.Prereqs = "gpu", "/tmp", 12.5, []string{"a", "b"}
		}, ""},
		{"command at the limit", func(js *JobSpec) { js.Command = strings.Repeat("y", job.MaxCommandBytes) }, ""},
		{"name at the limit", func(js *JobSpec) { js.Target = long[:job.MaxNameBytes] }, ""},
		{"est at the limit", func(js *JobSpec) { js.Est = 1e9 }, ""},
		{"missing command", func(js *JobSpec) { js.Command = "" }, "missing command"},
		{"command over the limit", func(js *JobSpec) { js.Command = strings.Repeat("y", job.MaxCommandBytes+1) }, fmt.Sprintf("the limit is %d", job.MaxCommandBytes)},
		{"huge command", func(js *JobSpec) { js.Command = strings.Repeat("y", 128<<10+1) }, fmt.Sprintf("the limit is %d", job.MaxCommandBytes)},
		{"NUL in command", func(js *JobSpec) { js.Command = "echo \x00" }, "NUL"},
		{"missing target", func(js *JobSpec) { js.Target = "" }, "empty target name"},
		{"target with space", func(js *JobSpec) { js.Target = "a b" }, "target name"},
		{"target with comma", func(js *JobSpec) { js.Target = "a,b" }, "comma"},
		{"target with newline", func(js *JobSpec) { js.Target = "a\nb" }, "control"},
		{"target with DEL", func(js *JobSpec) { js.Target = "a\x7f" }, "control"},
		{"long target", func(js *JobSpec) { js.Target = long }, "the limit is 256"},
		{"bad queue", func(js *JobSpec) { js.Queue = "q q" }, "queue name"},
		// mqsub -t -p a cmd: the -t flag took "-p" as its value.
		{"target that is a flag", func(js *JobSpec) { js.Target = "-p" }, `target name "-p" begins with '-'`},
		{"target with a dash inside", func(js *JobSpec) { js.Target = "a-b-" }, ""},
		{"prereq that is a flag", func(js *JobSpec) { js.Prereqs = []string{"-x"} }, "prerequisite target name"},
		{"after-any that is a flag", func(js *JobSpec) { js.AfterAny = []string{"-x"} }, "after-any target name"},
		{"relative cwd", func(js *JobSpec) { js.Cwd = "rel/dir" }, "not absolute"},
		{"dot cwd", func(js *JobSpec) { js.Cwd = "." }, "not absolute"},
		{"negative est", func(js *JobSpec) { js.Est = -1 }, "estimate"},
		{"NaN est", func(js *JobSpec) { js.Est = math.NaN() }, "estimate"},
		{"inf est", func(js *JobSpec) { js.Est = math.Inf(1) }, "estimate"},
		{"too large est", func(js *JobSpec) { js.Est = 1e9 + 1 }, "estimate"},
		{"bad prereq", func(js *JobSpec) { js.Prereqs = []string{"ok", "not ok"} }, "prerequisite target name"},
		{"empty prereq", func(js *JobSpec) { js.Prereqs = []string{""} }, "empty prerequisite target name"},
		{"self prereq", func(js *JobSpec) { js.Prereqs = []string{"t"} }, "its own prerequisite"},
		{"too many prereqs", func(js *JobSpec) { js.Prereqs = manyPrereqs }, "the limit is 10000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			js := good()
			tc.mod(&js)
			err := ValidateSpec(&js)
			if tc.errHas == "" {
				if err != nil {
					t.Fatalf("valid spec refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("invalid spec accepted: %+v", js)
			}
			if !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("error %q does not say %q", err, tc.errHas)
			}
			if strings.ContainsAny(err.Error(), "\n\x00") {
				t.Fatalf("error %q is not one clean line", err)
			}
		})
	}
	js := good()
	if err := ValidateSpec(&js); err != nil || js.Queue != DefaultQueue {
		t.Fatalf("default queue not filled: %q, %v", js.Queue, err)
	}
}

type emitted struct {
	line int
	js   JobSpec
}

func readAll(in string, def JobSpec) ([]emitted, error) {
	var out []emitted
	err := ReadJobFile(strings.NewReader(in), def, func(line int, js JobSpec) error {
		out = append(out, emitted{line, js})
		return nil
	})
	return out, err
}

func TestReadJobFileGood(t *testing.T) {
	t.Parallel()
	in := `# a comment
{"target":"a","command":"echo a"}

   # indented comment
{"target":"b","prereqs":["a"],"command":"echo b","cwd":"/work","queue":"gpu","est":3}
	{"target":"c","command":"echo c"}   ` + "\r\n" + `{"target":"d","command":"echo d"}` // no final newline
	got, err := readAll(in, JobSpec{Queue: "defq", Cwd: "/home/u"})
	if err != nil {
		t.Fatal(err)
	}
	want := []emitted{
		{2, JobSpec{Queue: "defq", Target: "a", Command: "echo a", Cwd: "/home/u"}},
		{5, JobSpec{Queue: "gpu", Target: "b", Prereqs: []string{"a"}, Command: "echo b", Cwd: "/work", Est: 3}},
		{6, JobSpec{Queue: "defq", Target: "c", Command: "echo c", Cwd: "/home/u"}},
		{7, JobSpec{Queue: "defq", Target: "d", Command: "echo d", Cwd: "/home/u"}},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d jobs, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.line != w.line || g.js.Queue != w.js.Queue || g.js.Target != w.js.Target || g.js.Command != w.js.Command ||
			g.js.Cwd != w.js.Cwd || g.js.Est != w.js.Est || fmt.Sprint(g.js.Prereqs) != fmt.Sprint(w.js.Prereqs) {
			t.Errorf("job %d = %+v, want %+v", i, g, w)
		}
	}
	// With no default queue, ValidateSpec fills "default".
	got, err = readAll(`{"target":"a","command":"x"}`, JobSpec{})
	if err != nil || len(got) != 1 || got[0].js.Queue != DefaultQueue {
		t.Fatalf("default queue: %+v, %v", got, err)
	}
	// A byte-order mark (a file saved by a Windows editor) is skipped at
	// the start of the file, and only there.
	got, err = readAll("\ufeff{\"target\":\"a\",\"command\":\"x\"}\n", JobSpec{})
	if err != nil || len(got) != 1 || got[0].js.Target != "a" {
		t.Errorf("a file starting with a BOM: %+v, %v", got, err)
	}
	if _, err := readAll("{\"target\":\"a\",\"command\":\"x\"}\n\ufeff{\"target\":\"b\",\"command\":\"x\"}\n", JobSpec{}); err == nil {
		t.Error("a BOM on line 2 was accepted")
	}
	for _, empty := range []string{"", "\n\n", "# only\n#comments", "\ufeff", "\ufeff# a comment\n"} {
		got, err := readAll(empty, JobSpec{})
		if err != nil || len(got) != 0 {
			t.Fatalf("%q: %+v, %v", empty, got, err)
		}
	}
}

// TestReadJobFileEnv: def.Env (mqsub -f -v) reaches every line, a line's
// own "env" wins for the same name, lines do not share a map, and the
// merged environment is validated.
func TestReadJobFileEnv(t *testing.T) {
	t.Parallel()
	in := `{"target":"a","command":"x"}
{"target":"b","command":"x","env":{"A":"own","C":"3"}}
{"target":"c","command":"x","env":{}}`
	got, err := readAll(in, JobSpec{Env: map[string]string{"A": "1", "B": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]string{{"A": "1", "B": "2"}, {"A": "own", "B": "2", "C": "3"}, {"A": "1", "B": "2"}}
	if len(got) != len(want) {
		t.Fatalf("got %d jobs: %+v", len(got), got)
	}
	for i, w := range want {
		if !maps.Equal(got[i].js.Env, w) {
			t.Errorf("line %d env = %v, want %v", got[i].line, got[i].js.Env, w)
		}
	}
	got[0].js.Env["A"] = "changed"
	if got[2].js.Env["A"] != "1" {
		t.Error("lines share one environment map")
	}
	if got, err := readAll(`{"target":"a","command":"x"}`, JobSpec{}); err != nil || got[0].js.Env != nil {
		t.Errorf("no default env: %+v, %v", got, err)
	}
	if _, err := readAll(`{"target":"a","command":"x"}`, JobSpec{Env: map[string]string{"MQ_JOB_ID": "1"}}); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("a reserved name from -v: %v", err)
	}
}

func TestReadJobFileErrors(t *testing.T) {
	t.Parallel()
	ok := `{"target":"a","command":"x"}` + "\n"
	tests := []struct {
		name string
		in   string
		line int
		has  string
	}{
		{"unknown key", ok + `{"target":"a","command":"x","prereq":["b"]}`, 2, `unknown field "prereq"`},
		{"bad JSON", ok + "\n" + `{"target":"a",`, 3, "line 3"},
		{"not an object", `["a"]`, 1, "not a JSON object"},
		{"bare word", ok + ok + "hello", 3, "not a JSON object"},
		{"missing command", ok + "# c\n" + `{"target":"a"}`, 3, "missing command"},
		{"missing target", `{"command":"x"}`, 1, "empty target name"},
		{"wrong type", `{"target":"a","command":"x","est":"long"}`, 1, `field "est" must be float64`},
		{"prereqs not a list", `{"target":"a","command":"x","prereqs":"b"}`, 1, `field "prereqs"`},
		{"two objects", `{"target":"a","command":"x"} {"target":"b","command":"y"}`, 1, "more than one JSON value"},
		{"trailing garbage", `{"target":"a","command":"x"} trailing`, 1, "line 1"},
		{"relative cwd", `{"target":"a","command":"x","cwd":"rel"}`, 1, "not absolute"},
		{"negative est", `{"target":"a","command":"x","est":-2}`, 1, "estimate"},
		{"self prereq", `{"target":"a","command":"x","prereqs":["a"]}`, 1, "own prerequisite"},
		{"huge command", `{"target":"a","command":"` + strings.Repeat("z", job.MaxCommandBytes+1) + `"}`, 1, "the limit is"},
		{"bad default cwd applies", `{"target":"a","command":"x"}`, 1, ""}, // filled below
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			def := JobSpec{}
			if tc.name == "bad default cwd applies" {
				def.Cwd = "relative"
				tc.has = "not absolute"
			}
			got, err := readAll(tc.in, def)
			if err == nil {
				t.Fatalf("accepted; emitted %+v", got)
			}
			prefix := fmt.Sprintf("line %d: ", tc.line)
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Fatalf("error %q does not start with %q", err, prefix)
			}
			if !strings.Contains(err.Error(), tc.has) {
				t.Fatalf("error %q does not say %q", err, tc.has)
			}
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("error %q is not one line", err)
			}
		})
	}
}

func TestReadJobFileStopsAtFirstBadLine(t *testing.T) {
	t.Parallel()
	in := `{"target":"a","command":"x"}
{"target":"b","command":"x"}
{"target":"c"}
{"target":"d","command":"x"}`
	got, err := readAll(in, JobSpec{})
	if err == nil || !strings.HasPrefix(err.Error(), "line 3: ") {
		t.Fatalf("err = %v", err)
	}
	if len(got) != 2 || got[0].line != 1 || got[1].line != 2 {
		t.Fatalf("emitted %+v, want lines 1 and 2", got)
	}
}

func TestReadJobFileEmitError(t *testing.T) {
	t.Parallel()
	stop := errors.New("stop here")
	n := 0
	err := ReadJobFile(strings.NewReader(`{"target":"a","command":"x"}`+"\n"+`{"target":"b","command":"x"}`), JobSpec{}, func(int, JobSpec) error {
		n++
		return stop
	})
	if !errors.Is(err, stop) || n != 1 {
		t.Fatalf("emit error: %v after %d calls", err, n)
	}
}

func TestReadJobFileLongLine(t *testing.T) {
	t.Parallel()
	in := `{"target":"a","command":"x"}` + "\n" + strings.Repeat(" ", MaxFrame+10) + "\n"
	_, err := readAll(in, JobSpec{})
	if err == nil || !strings.HasPrefix(err.Error(), "line 2: longer than") {
		t.Fatalf("err = %v", err)
	}
	// A long but valid line (within MaxFrame) is read whole.
	cmd := strings.Repeat("c", job.MaxCommandBytes)
	got, err := readAll(`{"target":"a","command":"`+cmd+`"}`, JobSpec{})
	if err != nil || len(got) != 1 || got[0].js.Command != cmd {
		t.Fatalf("long valid line: %v", err)
	}
}

func TestReadJobFileReadError(t *testing.T) {
	t.Parallel()
	r := io.MultiReader(strings.NewReader(`{"target":"a","command":"x"}`+"\n"), iotest.ErrReader(errors.New("disk gone")))
	var lines []int
	err := ReadJobFile(r, JobSpec{}, func(line int, js JobSpec) error { lines = append(lines, line); return nil })
	if err == nil || !strings.Contains(err.Error(), "line 2: disk gone") {
		t.Fatalf("err = %v", err)
	}
}

func FuzzParseRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":1,"op":"hello","body":{"proto":1}}`,
		`{"id":2,"op":"submit","body":{"jobs":[{"target":"a","command":"x"}]}}`,
		`{"id":"x"}`, `{}`, `null`, `[`, "\xff\xfe", `{"id":1e999,"op":"a"}`, `{"op":"\u0000"}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := ParseRequest(line)
		if err != nil {
			if !IsCode(err, CodeBadRequest) {
				t.Fatalf("error %v is not bad_request", err)
			}
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("error %q is not one line", err)
			}
			return
		}
		if req == nil || req.Op == "" {
			t.Fatalf("accepted a request without op: %+v", req)
		}
		// A parsed request survives a round trip.
		b, err := AppendFrame(nil, req)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		again, err := NewReader(bytes.NewReader(b)).ReadRequest()
		if err != nil || again.ID != req.ID || again.Op != req.Op {
			t.Fatalf("round trip: %+v, %v (was %+v)", again, err, req)
		}
	})
}

func FuzzReadJobFile(f *testing.F) {
	for _, s := range []string{
		"{\"target\":\"a\",\"command\":\"x\"}\n",
		"# c\n\n{\"target\":\"b\",\"prereqs\":[\"a\"],\"command\":\"x\",\"cwd\":\"/w\",\"est\":1}\n",
		"{\"target\":\"a\"}", "{\"x\":1}", "{", "\r\n\r\n{\"target\":\"a\",\"command\":\"x\"}\r\n", "\xff",
		"{\"target\":\"a\",\"command\":\"x\"} {}",
		"{\"target\":\"a\",\"command\":\"x\",\"inputs\":[{\"path\":\"in\",\"size\":3}],\"outputs\":[{\"path\":\"/o\"}]}\n",
		"{\"target\":\"a\",\"command\":\"x\",\"cpus\":4,\"mem\":\"8G\",\"gpus\":1,\"resources\":{\"lic\":2}}\n",
		"{\"target\":\"a\",\"command\":\"x\",\"cpus\":\"auto\",\"mem\":500}\n{\"target\":\"b\",\"command\":\"x\",\"mem_bytes\":7,\"mem_auto\":true}\n",
		"{\"target\":\"a\",\"command\":\"x\",\"mem\":\"1.5e3G\",\"cpus\":-0}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		last := 0
		err := ReadJobFile(bytes.NewReader(data), JobSpec{Cwd: "/def"}, func(line int, js JobSpec) error {
			if line <= last {
				t.Fatalf("line %d after line %d", line, last)
			}
			last = line
			if err := ValidateSpec(&js); err != nil {
				t.Fatalf("emitted an invalid spec on line %d: %v", line, err)
			}
			if js.Cwd == "" {
				t.Fatalf("line %d: default cwd not applied", line)
			}
			return nil
		})
		if err == nil {
			return
		}
		msg := err.Error()
		if strings.ContainsAny(msg, "\n\r") {
			t.Fatalf("error %q is not one line", msg)
		}
		var n int
		if _, serr := fmt.Sscanf(msg, "line %d:", &n); serr != nil || n <= last || n > bytes.Count(data, []byte("\n"))+1 {
			t.Fatalf("error %q does not name a plausible line (last good %d)", msg, last)
		}
	})
}

// TestLostFor: each stream gets the causes that name it or no stream.
func TestLostFor(t *testing.T) {
	t.Parallel()
	rec := "stdout: copy failed; stderr not copied (too large); node lost"
	for _, c := range []struct{ lost, stream, want string }{
		{"", "stdout", ""},
		{rec, "stdout", "stdout: copy failed; node lost"},
		{rec, "stderr", "stderr not copied (too large); node lost"},
		{"stderr: gone", "stdout", ""},
	} {
		if got := LostFor(c.lost, c.stream); got != c.want {
			t.Errorf("LostFor(%q, %s) = %q, want %q", c.lost, c.stream, got, c.want)
		}
	}
}
