package protocol

import (
	"encoding/json"
	"reflect"
	"testing"
)

// slowBulkAdd is the general path: ParseRequest, then the body decoded.
func slowBulkAdd(line []byte) (uint64, BulkAdd, bool) {
	req, err := ParseRequest(line)
	if err != nil || req.Op != OpBulkAdd.Name {
		return 0, BulkAdd{}, false
	}
	var add BulkAdd
	if err := json.Unmarshal(req.Body, &add); err != nil {
		return 0, BulkAdd{}, false
	}
	return req.ID, add, true
}

func frameOf(t testing.TB, id uint64, add BulkAdd) []byte {
	body, err := json.Marshal(add)
	if err != nil {
		t.Fatal(err)
	}
	b, err := AppendFrame(nil, Request{ID: id, Op: OpBulkAdd.Name, Body: body})
	if err != nil {
		t.Fatal(err)
	}
	return b[:len(b)-1] // ReadLine strips the newline
}

func TestFastBulkAdd(t *testing.T) {
	// What clients send is taken by the fast path.
	for _, add := range []BulkAdd{
		{Line: 1, Data: []byte("{\"target\":\"t\",\"command\":\"echo \\\"hi\\\"\"}\n"), Queue: "q", Cwd: "/home/u/p"},
		{Line: 2001, Data: []byte{0, 1, 2, 0xff}},
		{Line: 7},
	} {
		line := frameOf(t, 42, add)
		id, got, ok := FastBulkAdd(line)
		if !ok {
			t.Errorf("fast path refused a client frame: %s", line)
			continue
		}
		if id != 42 || !reflect.DeepEqual(got, add) && !(len(got.Data) == 0 && len(add.Data) == 0) {
			t.Errorf("%s: got id %d %+v, want 42 %+v", line, id, got, add)
		}
	}
	// Anything else is left to the general path.
	for _, s := range []string{
		`{"id":1,"op":"bulk.add","body":{"line":1,"line":2}}`,
		`{"id":1,"op":"bulk.commit","body":{}}`,
		`{"id":1, "op":"bulk.add","body":{}}`,
		`{"id":01,"op":"bulk.add","body":{}}`,
		`{"id":1,"op":"bulk.add","body":{"data":"a\/b="}}`,
		`{"id":1,"op":"bulk.add","body":{"data":"abc"}}`,
		`{"id":1,"op":"bulk.add","body":{"Line":1}}`,
		`{"id":1,"op":"bulk.add","body":{"line":1}}x`,
		`{"id":1,"op":"bulk.add","body":{"line":1},"x":2}`,
		`{"id":1,"op":"bulk.add","body":{"jobs":[]}}`,
	} {
		if _, _, ok := FastBulkAdd([]byte(s)); ok {
			t.Errorf("fast path took %s", s)
		}
	}
}

// FuzzFastBulkAdd checks that the fast path agrees with the general one on
// every frame it accepts.
func FuzzFastBulkAdd(f *testing.F) {
	f.Add([]byte(`{"id":1,"op":"bulk.add","body":{"line":1,"data":"eyJ0YXJnZXQiOiJ0In0K","queue":"q","cwd":"/tmp"}}`))
	f.Add([]byte(`{"id":18446744073709551615,"op":"bulk.add","body":{"cwd":"/","line":-3,"data":""}}`))
	f.Add([]byte(`{"id":1,"op":"bulk.add","body":{}}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		id, add, ok := FastBulkAdd(line)
		if !ok {
			return
		}
		sid, sadd, sok := slowBulkAdd(line)
		if !sok {
			t.Fatalf("fast path took %q, which the general path refuses", line)
		}
		if id != sid || !reflect.DeepEqual(add, sadd) {
			t.Fatalf("%q: fast %d %#v, general %d %#v", line, id, add, sid, sadd)
		}
	})
}

// AppendRequest writes what AppendFrame writes for a Request, without
// re-scanning the body.
func TestAppendRequest(t *testing.T) {
	for _, c := range []struct {
		id   uint64
		op   string
		body any
	}{
		{1, OpBulkAdd.Name, BulkAdd{Line: 3, Data: []byte("{\"a\":\"<b>\"}\n"), Cwd: "/tmp/é"}},
		{18446744073709551615, OpNext.Name, Next{Placeholder: 7, Free: 2}},
		{0, "op\"with\\quotes", map[string]int{}},
		{5, OpSummary.Name, nil},
	} {
		var raw []byte
		if c.body != nil {
			var err error
			if raw, err = json.Marshal(c.body); err != nil {
				t.Fatal(err)
			}
		}
		want, err := AppendFrame(nil, Request{ID: c.id, Op: c.op, Body: raw})
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendRequest(nil, c.id, c.op, raw)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("AppendRequest:\n%s\nAppendFrame:\n%s", got, want)
		}
	}
}

// AppendResponse writes what AppendFrame writes for a Response whose body
// is json.Marshal's output, without re-scanning the body.
func TestAppendResponse(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		resp Response
		body any
	}{
		{Response{ID: 1, More: true}, []JobInfo{{ID: 7, Command: "a <b> & \u2028 \"c\"\n\td", Cwd: "/tmp/é"}, {ID: 8}}},
		{Response{ID: 18446744073709551615}, Empty{}},
		{Response{ID: 2, Err: &Error{Code: CodeBadRequest, Msg: "bad <thing>"}}, map[string]int{"n": 1}},
		{Response{ID: 3, Err: &Error{Code: CodeInternal, Msg: "no body"}}, nil},
		{Response{ID: 4, Body: json.RawMessage("{\n}")}, nil}, // not Marshal's: AppendFrame compacts it
		{Response{ID: 5}, nil},
	} {
		resp := c.resp
		if c.body != nil {
			var err error
			if resp.Body, err = json.Marshal(c.body); err != nil {
				t.Fatal(err)
			}
		}
		want, err := AppendFrame([]byte("x"), &resp)
		if err != nil {
			t.Fatal(err)
		}
		got, err := AppendResponse([]byte("x"), &resp)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("AppendResponse:\n%s\nAppendFrame:\n%s", got, want)
		}
	}
}

// BenchmarkAppendResponse: one op frames a streamed listing's batch of
// 1,000 jobs (what mqstat receives per frame).
func BenchmarkAppendResponse(b *testing.B) {
	jobs := make([]JobInfo, 1000)
	for i := range jobs {
		jobs[i] = JobInfo{ID: int64(i + 1), Queue: "default", Target: "arr", State: "Q", Command: "./simulate --case 17 > out/case17.txt", Cwd: "/home/user/project"}
	}
	body, err := json.Marshal(jobs)
	if err != nil {
		b.Fatal(err)
	}
	resp := &Response{ID: 9, More: true, Body: body}
	for _, f := range []struct {
		name   string
		append func([]byte, *Response) ([]byte, error)
	}{
		{"AppendFrame", func(dst []byte, r *Response) ([]byte, error) { return AppendFrame(dst, r) }},
		{"AppendResponse", AppendResponse},
	} {
		b.Run(f.name, func(b *testing.B) {
			var dst []byte
			b.SetBytes(int64(len(body)))
			for range b.N {
				if dst, err = f.append(dst[:0], resp); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
