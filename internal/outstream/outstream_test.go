package outstream

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

func newStream(t *testing.T) (*Writer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ph1-0.mqout")
	w, err := Create(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w, path
}

func readBack(t *testing.T, path string, tag Tag, ext Extent) (string, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b bytes.Buffer
	_, err = Read(&b, f, tag, ext)
	return b.String(), err
}

// TestManyOutputsOneFile: the outputs of jobs running at once, interleaved
// in one file, each read back whole and alone.
func TestManyOutputsOneFile(t *testing.T) {
	w, path := newStream(t)
	const jobs = 40
	want := map[Tag]string{}
	exts := map[Tag]Extent{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for j := 1; j <= jobs; j++ {
		for _, s := range []Stream{Stdout, Stderr} {
			tag := Tag{Job: int64(j), Attempt: 1 + j%3, Stream: s}
			// Sizes across the chunk boundary, and empty ones.
			n := (j * 7919 * (1 + int(s))) % (3 * ChunkSize)
			if j%10 == 0 {
				n = 0
			}
			text := strings.Repeat(fmt.Sprintf("%s line %d\n", tag, j), n/20+1)[:n]
			want[tag] = text
			wg.Add(1)
			go func() {
				defer wg.Done()
				o := w.Output(tag, 0)
				for rest := text; len(rest) > 0; {
					k := min(len(rest), 1000+j)
					if _, err := o.Write([]byte(rest[:k])); err != nil {
						t.Error(err)
						return
					}
					if j%4 == 0 {
						o.Flush() // a follower's small chunks
					}
					rest = rest[k:]
				}
				ext, err := o.Close()
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				exts[tag] = ext
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	for tag, text := range want {
		got, err := readBack(t, path, tag, exts[tag])
		if err != nil || got != text {
			t.Fatalf("%s: read %d bytes, err %v; want %d bytes", tag, len(got), err, len(text))
		}
		if text == "" && exts[tag].Last != -1 {
			t.Errorf("%s: an empty output wrote a chunk (extent %+v)", tag, exts[tag])
		}
	}
	// One file for every output.
	if ents, _ := os.ReadDir(filepath.Dir(path)); len(ents) != 1 {
		t.Errorf("%d files in the output area, want 1", len(ents))
	}
}

func TestReadRefusesWhatIsNotRecorded(t *testing.T) {
	w, path := newStream(t)
	a := Tag{Job: 1, Attempt: 1, Stream: Stdout}
	b := Tag{Job: 2, Attempt: 1, Stream: Stdout}
	oa, ob := w.Output(a, 0), w.Output(b, 0)
	oa.Write([]byte("aaaa"))
	oa.Flush()
	ob.Write([]byte("bb"))
	ea, _ := oa.Close()
	eb, _ := ob.Close()
	w.Sync()
	for _, tc := range []struct {
		name string
		tag  Tag
		ext  Extent
	}{
		{"another job's chunk", b, ea},
		{"another attempt", Tag{Job: 1, Attempt: 2}, ea},
		{"stderr for stdout", Tag{Job: 1, Attempt: 1, Stream: Stderr}, ea},
		{"wrong byte count", a, Extent{Last: ea.Last, Bytes: 3}},
		{"not a chunk's offset", a, Extent{Last: ea.Last + 1, Bytes: 4}},
		{"past the end", a, Extent{Last: 1 << 40, Bytes: 4}},
		{"bytes and no chunk", a, Extent{Last: -1, Bytes: 4}},
		{"not the last chunk", b, Extent{Last: eb.Last, Bytes: 2}}, // fine: control below
	} {
		got, err := readBack(t, path, tc.tag, tc.ext)
		if tc.name == "not the last chunk" {
			if err != nil || got != "bb" {
				t.Errorf("control: %q, %v", got, err)
			}
			continue
		}
		if !errors.Is(err, ErrTorn) || got != "" {
			t.Errorf("%s: read %q, err %v; want nothing and ErrTorn", tc.name, got, err)
		}
	}
}

// TestTornTail: a writer killed mid-chunk leaves a torn tail; Append cuts
// it, outputs recorded before it read whole, the torn one is refused, and
// writing goes on after the cut.
func TestTornTail(t *testing.T) {
	w, path := newStream(t)
	a := Tag{Job: 1, Attempt: 1}
	oa := w.Output(a, 0)
	oa.Write([]byte("whole output\n"))
	ea, _ := oa.Close()
	b := Tag{Job: 2, Attempt: 1}
	ob := w.Output(b, 0)
	ob.Write(bytes.Repeat([]byte("x"), 5000))
	eb, _ := ob.Close()
	w.Close()
	st, _ := os.Stat(path)
	for _, cut := range []int64{1, HeaderSize, HeaderSize + 10, 4999} {
		t.Run(fmt.Sprint(cut), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "s.mqout")
			data, _ := os.ReadFile(path)
			os.WriteFile(p, data[:st.Size()-cut], 0o600)
			if _, err := readBack(t, p, b, eb); !errors.Is(err, ErrTorn) {
				t.Errorf("torn output read: err %v, want ErrTorn", err)
			}
			w2, torn, err := Append(p)
			if err != nil || !torn {
				t.Fatalf("Append: torn %v, err %v", torn, err)
			}
			if w2.Size() != eb.Last {
				t.Errorf("cut at %d, want %d (where the torn chunk began)", w2.Size(), eb.Last)
			}
			if got, err := readBack(t, p, a, ea); err != nil || got != "whole output\n" {
				t.Errorf("whole output after the cut: %q, %v", got, err)
			}
			c := Tag{Job: 3, Attempt: 1}
			oc := w2.Output(c, 0)
			oc.Write([]byte("after"))
			ec, _ := oc.Close()
			w2.Close()
			if got, err := readBack(t, p, c, ec); err != nil || got != "after" {
				t.Errorf("output after the cut: %q, %v", got, err)
			}
		})
	}
	// A whole file is not cut.
	if w3, torn, err := Append(path); err != nil || torn || w3.Size() != st.Size() {
		t.Errorf("whole file: torn %v, err %v", torn, err)
	} else {
		w3.Close()
	}
}

func TestCap(t *testing.T) {
	w, path := newStream(t)
	tag := Tag{Job: 7, Attempt: 1}
	o := w.Output(tag, 10)
	if _, err := o.Write([]byte("12345678")); err != nil {
		t.Fatal(err)
	}
	n, err := o.Write([]byte("9abcdef"))
	if n != 7 || !errors.Is(err, ErrCut) {
		t.Fatalf("Write past the cap = %d, %v; want 7, ErrCut", n, err)
	}
	ext, _ := o.Close()
	if !ext.Cut || ext.Bytes != 10 {
		t.Errorf("extent %+v, want 10 bytes, cut", ext)
	}
	if got, err := readBack(t, path, tag, ext); err != nil || got != "123456789a" {
		t.Errorf("read %q, %v", got, err)
	}
	f, _ := os.Open(path)
	defer f.Close()
	st, _ := f.Stat()
	s := NewScanner(f, st.Size())
	p, err := s.Next()
	if err != nil || !p.Cut || !p.Last {
		t.Errorf("scanned %+v, %v: want the chunk marked cut and last", p, err)
	}
}

func TestNotAStream(t *testing.T) {
	dir := t.TempDir()
	for name, data := range map[string]string{"short": "MQ", "other": "hello world, not a stream"} {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(data), 0o600)
		if _, _, err := Append(p); err == nil || errors.Is(err, ErrTorn) {
			t.Errorf("%s: Append err %v, want 'not a stream file'", name, err)
		}
		if b, _ := os.ReadFile(p); string(b) != data {
			t.Errorf("%s: changed to %q", name, b)
		}
	}
}

func TestCreateIsPrivate(t *testing.T) {
	_, path := newStream(t)
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, err %v; want 0600", st.Mode().Perm(), err)
	}
	if _, err := Create(path); err == nil {
		t.Error("Create over an existing file succeeded")
	}
}

// FuzzScan: any bytes are scanned and read without a panic, an endless
// walk or a large allocation past MaxChunk.
func FuzzScan(f *testing.F) {
	dir := f.TempDir()
	w, err := Create(filepath.Join(dir, "seed"))
	if err != nil {
		f.Fatal(err)
	}
	o := w.Output(Tag{Job: 1, Attempt: 1}, 0)
	o.Write([]byte("hello"))
	o.Flush()
	o.Write([]byte(" world"))
	ext, _ := o.Close()
	w.Close()
	seed, _ := os.ReadFile(filepath.Join(dir, "seed"))
	f.Add(seed, ext.Last, ext.Bytes)
	f.Add(seed[:len(seed)-3], ext.Last, ext.Bytes)
	f.Add([]byte(Magic), int64(8), int64(0))
	f.Fuzz(func(t *testing.T, data []byte, last, n int64) {
		r := bytes.NewReader(data)
		s := NewScanner(r, int64(len(data)))
		for i := 0; ; i++ {
			if i > len(data) {
				t.Fatal("more chunks than bytes")
			}
			if _, err := s.Next(); err != nil {
				break
			}
		}
		if n > 1<<20 {
			n = 1 << 20 // a recorded extent is the CLS's, bounded
		}
		Read(io.Discard, r, Tag{Job: 1, Attempt: 1}, Extent{Last: last, Bytes: n})
	})
}

// FuzzFollow: a Follower given any bytes never panics, passes no more
// bytes than there are, and passes the same bytes whether it polls the
// file as it grows (cut at any points) or once whole: a chunk is passed
// only whole, never half, wherever a poll stops.
func FuzzFollow(f *testing.F) {
	dir := f.TempDir()
	w, err := Create(filepath.Join(dir, "seed"))
	if err != nil {
		f.Fatal(err)
	}
	a, b := w.Output(Tag{Job: 1, Attempt: 1}, 0), w.Output(Tag{Job: 2, Attempt: 1}, 0)
	a.Write([]byte("hello"))
	a.Flush()
	b.Write([]byte("other"))
	b.Flush()
	a.Write([]byte(" world"))
	a.Close()
	b.Close()
	w.Close()
	seed, _ := os.ReadFile(filepath.Join(dir, "seed"))
	f.Add(seed, uint16(20), uint16(7))
	f.Add(seed[:len(seed)-3], uint16(0), uint16(1))
	f.Add([]byte(Magic), uint16(3), uint16(3))
	f.Fuzz(func(t *testing.T, data []byte, first, step uint16) {
		follow := func(cuts []int64) ([]byte, error) {
			fl := NewFollower(Tag{Job: 1, Attempt: 1})
			var got []byte
			r := bytes.NewReader(data)
			for _, size := range cuts {
				if err := fl.Poll(r, size, func(p []byte) error { got = append(got, p...); return nil }); err != nil {
					return got, err
				}
			}
			if fl.Bytes() != int64(len(got)) {
				t.Fatalf("Bytes() = %d, passed %d", fl.Bytes(), len(got))
			}
			return got, nil
		}
		var cuts []int64
		for size := int64(first); size < int64(len(data)); size += int64(step) + 1 {
			cuts = append(cuts, size)
		}
		cuts = append(cuts, int64(len(data)))
		grown, gerr := follow(cuts)
		whole, werr := follow([]int64{int64(len(data))})
		if len(grown) > len(data) || len(whole) > len(data) {
			t.Fatalf("passed %d and %d bytes of %d", len(grown), len(whole), len(data))
		}
		if (gerr == nil) == (werr == nil) && !bytes.Equal(grown, whole) {
			t.Fatalf("polled as it grew: %q; once whole: %q", grown, whole)
		}
	})
}

// TestReadTail: the last bytes of an output of many chunks, of one chunk
// and of none, for limits inside a chunk, on a boundary and past the
// whole; a damaged chunk among those read is an error.
func TestReadTail(t *testing.T) {
	w, path := newStream(t)
	write := func(tag Tag, text string, piece int) Extent {
		o := w.Output(tag, 0)
		for rest := text; len(rest) > 0; {
			k := min(len(rest), piece)
			if _, err := o.Write([]byte(rest[:k])); err != nil {
				t.Fatal(err)
			}
			o.Flush() // a chunk each
			rest = rest[k:]
		}
		ext, err := o.Close()
		if err != nil {
			t.Fatal(err)
		}
		return ext
	}
	many, one, none := Tag{Job: 1, Attempt: 1}, Tag{Job: 2, Attempt: 1}, Tag{Job: 3, Attempt: 1}
	text := strings.Repeat("0123456789", 50) // 500 bytes, chunks of 64
	exts := map[Tag]Extent{many: write(many, text, 64), one: write(one, "short\n", 100), none: write(none, "", 1)}
	if err := w.Sync(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, tc := range []struct {
		tag       Tag
		limit     int64
		want      string
		truncated bool
	}{
		{many, 10, text[490:], true},
		{many, 64, text[436:], true},
		{many, 116, text[384:], true}, // 500 = 7*64 + 52: on a boundary
		{many, 499, text[1:], true},
		{many, 500, text, false},
		{many, 1 << 20, text, false},
		{one, 3, "rt\n", true},
		{one, 6, "short\n", false},
		{none, 10, "", false},
	} {
		var b bytes.Buffer
		truncated, err := ReadTail(&b, f, tc.tag, exts[tc.tag], tc.limit)
		if err != nil || b.String() != tc.want || truncated != tc.truncated {
			t.Errorf("ReadTail(%s, %d) = %q, %v, %v; want %q, %v", tc.tag, tc.limit, b.String(), truncated, err, tc.want, tc.truncated)
		}
	}
	// A chunk read for the tail that is not what was written is an error,
	// with nothing written.
	damaged := filepath.Join(t.TempDir(), "damaged")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The last chunk may be the empty one Close marks last: damage the
	// last chunk with bytes.
	off := exts[many].Last
	if c, _, err := readChunk(f, off, nil); err != nil {
		t.Fatal(err)
	} else if c.n == 0 {
		off = c.prev
	}
	data[off+HeaderSize] ^= 0xff
	if err := os.WriteFile(damaged, data, 0o600); err != nil {
		t.Fatal(err)
	}
	g, err := os.Open(damaged)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	var b bytes.Buffer
	if _, err := ReadTail(&b, g, many, exts[many], 10); !errors.Is(err, ErrTorn) || b.Len() != 0 {
		t.Errorf("a damaged last chunk: %q, %v; want nothing and ErrTorn", b.String(), err)
	}
}
