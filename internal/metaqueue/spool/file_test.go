package spool

import (
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestFile: specs written to a spool file read back in order; past its
// caps on jobs or bytes it refuses more (too_large), naming the line.
func TestFile(t *testing.T) {
	for _, c := range []struct {
		name     string
		maxJobs  int
		maxBytes int64
		have, n  int    // jobs spooled already, jobs asked to fit
		wantErr  string // "": all fit and read back
	}{
		{"fits", 100, 1 << 20, 0, len(specs()), ""},
		{"jobs", 10, 1 << 20, 8, 4, "line 3: a bulk submission holds at most 10 jobs"},
		{"jobs full", 10, 1 << 20, 12, 1, "line 1: a bulk submission holds at most 10 jobs"},
		{"bytes", 100, 20, 0, len(specs()), "a bulk submission spools at most 20 bytes on the CLS"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, err := Create(t.TempDir(), c.maxJobs, c.maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			err = f.Fits(1, c.have, c.n)
			for i := 0; err == nil && i < len(specs()); i++ {
				js := specs()[i]
				err = f.Write(1+i, &js)
			}
			if c.wantErr != "" {
				if !protocol.IsCode(err, protocol.CodeTooLarge) || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("got %v, want a too_large error with %q", err, c.wantErr)
				}
				if f.Size() > c.maxBytes+int64(len(f.buf)) {
					t.Errorf("spooled %d bytes past the cap %d", f.Size(), c.maxBytes)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Flush(); err != nil {
				t.Fatal(err)
			}
			r, err := f.Rewind()
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range specs() {
				var got protocol.JobSpec
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
		})
	}
}

// TestFlushEndsWriting: Flush lets the write buffer go (the commit's
// collection returns it, rather than the spool holding a megabyte until
// Close); a second Flush is harmless and a Write after it is an error,
// not a panic.
func TestFlushEndsWriting(t *testing.T) {
	f, err := Create(t.TempDir(), 10, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	js := specs()[0]
	if err := f.Write(1, &js); err != nil {
		t.Fatal(err)
	}
	if err := f.Flush(); err != nil {
		t.Fatal(err)
	}
	if f.w != nil {
		t.Error("the write buffer is kept after Flush")
	}
	if err := f.Flush(); err != nil {
		t.Errorf("a second Flush: %v", err)
	}
	if err := f.Write(2, &js); err == nil || !strings.Contains(err.Error(), "after its commit began") {
		t.Errorf("a Write after Flush: %v", err)
	}
	r, err := f.Rewind()
	if err != nil {
		t.Fatal(err)
	}
	var got protocol.JobSpec
	if err := Read(r, &got); err != nil || !reflect.DeepEqual(got, js) {
		t.Fatalf("read back %+v, %v", got, err)
	}
}
