package spool

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"reflect"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

func size(n int64) *int64 { return &n }

func specs() []protocol.JobSpec {
	return []protocol.JobSpec{
		{},
		{Target: "t", Command: "true"},
		{Queue: "q", Target: "a/b", Command: "echo 'x y'\n", Cwd: "/home/u", Est: 12.5,
			Prereqs: []string{"p1", "p2"}, AfterAny: []string{"a1"}},
		{Target: "files", Command: "cat in > out",
			Inputs:  []protocol.File{{Path: "/d/in", Size: size(0)}, {Path: "/d/rel", Rel: true, MTime: 1700000000123456789}},
			Outputs: []protocol.File{{Path: "/d/out", Size: size(1 << 40), MTime: -1}}},
		{Target: "env", Command: "env", Env: map[string]string{"A": "1", "B": "x=y", "EMPTY": ""}},
		{Target: "flags", Command: "c", NoReplicate: true, Hold: true, Priority: -7},
		{Target: "res", Command: "c", Priority: 3, Resources: protocol.Resources{CPUs: 4, Mem: 2 << 30, GPUs: 1, Named: map[string]int{"licence": 2}}},
		{Target: "nan", Command: "c", Est: math.Inf(1)},
		{Target: "latin1", Command: "cat \xe9t\xe9"},
	}
}

func TestRoundTrip(t *testing.T) {
	var b []byte
	for i := range specs() {
		js := specs()[i]
		b = Append(b, &js)
	}
	r := bufio.NewReader(bytes.NewReader(b))
	for i, want := range specs() {
		var got protocol.JobSpec
		got.Queue = "left over" // Read starts afresh
		if err := Read(r, &got); err != nil {
			t.Fatalf("spec %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("spec %d:\n got %+v\nwant %+v", i, got, want)
		}
	}
	var js protocol.JobSpec
	if err := Read(r, &js); err != io.EOF {
		t.Errorf("after the last spec: %v, want io.EOF", err)
	}
}

func TestReadBad(t *testing.T) {
	good := Append(nil, &protocol.JobSpec{Target: "target", Command: "c", Prereqs: []string{"p"},
		Resources: protocol.Resources{CPUs: 2}})
	// Empty queue, target, command and cwd, then the estimate: where an
	// encoding's counts begin.
	head := make([]byte, 4+8)
	at := func(rest ...byte) []byte { return append(append([]byte(nil), head...), rest...) }
	tests := []struct {
		name string
		in   []byte
		want error // nil: any error
	}{
		{"empty", nil, io.EOF},
		{"cut in a string", good[:4], io.ErrUnexpectedEOF},
		{"cut in the estimate", good[:14], io.ErrUnexpectedEOF},
		{"cut before the flags", good[:len(good)-len(`{"cpus":2}`)-3], io.EOF},
		{"cut in the resources", good[:len(good)-1], io.ErrUnexpectedEOF},
		{"string longer than a frame", []byte{0xff, 0xff, 0xff, 0xff, 0x0f}, ErrCorrupt},
		{"too many prereqs", at(0xff, 0xff, 0x03), ErrCorrupt},
		{"too many after-any targets", at(0, 0xff, 0xff, 0x03), ErrCorrupt},
		{"too many inputs", at(0, 0, 0xff, 0xff, 0x03), ErrCorrupt},
		{"too many outputs", at(0, 0, 0, 0xff, 0xff, 0x03), ErrCorrupt},
		{"too many env entries", at(0, 0, 0, 0, 0xff, 0xff, 0x7f), ErrCorrupt},
		{"varint overflow", bytes.Repeat([]byte{0xff}, 11), nil},
		{"resources not JSON", at(0, 0, 0, 0, 0, 4, 0, 1, '{'), ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var js protocol.JobSpec
			err := Read(bufio.NewReader(bytes.NewReader(tt.in)), &js)
			if err == nil {
				t.Fatalf("no error; read %+v", js)
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %v, want %v", err, tt.want)
			}
		})
	}
}

// FuzzRead: bytes that are not a spooled spec give an error, never a
// panic; what reads back whole encodes to what it read.
func FuzzRead(f *testing.F) {
	for _, js := range specs() {
		f.Add(Append(nil, &js))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, in []byte) {
		var js protocol.JobSpec
		if err := Read(bufio.NewReader(bytes.NewReader(in)), &js); err != nil {
			return
		}
		var again protocol.JobSpec
		if err := Read(bufio.NewReader(bytes.NewReader(Append(nil, &js))), &again); err != nil {
			t.Fatalf("a spec read back does not read again: %v", err)
		}
		if !reflect.DeepEqual(Append(nil, &js), Append(nil, &again)) {
			t.Errorf("encodings differ:\n%+v\n%+v", js, again)
		}
	})
}
