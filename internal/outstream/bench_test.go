package outstream

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkSmallOutputs writes one short output per job ("hi\n", as
// 'echo hi' prints), synced every 64 jobs as an agent reports them: into a
// stream file, and, as the baseline in the same run, one file per job.
func BenchmarkSmallOutputs(b *testing.B) {
	b.Run("stream", func(b *testing.B) {
		w, err := Create(filepath.Join(b.TempDir(), "s.mqout"))
		if err != nil {
			b.Fatal(err)
		}
		defer w.Close()
		for i := 0; i < b.N; i++ {
			o := w.Output(Tag{Job: int64(i + 1), Attempt: 1}, 0)
			o.Write([]byte("hi\n"))
			if _, err := o.Close(); err != nil {
				b.Fatal(err)
			}
			if i%64 == 63 {
				w.Sync()
			}
		}
	})
	b.Run("file-per-job", func(b *testing.B) {
		dir := b.TempDir()
		var open []*os.File
		for i := 0; i < b.N; i++ {
			f, err := os.OpenFile(filepath.Join(dir, fmt.Sprint(i+1)+".out"), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
			if err != nil {
				b.Fatal(err)
			}
			f.Write([]byte("hi\n"))
			open = append(open, f)
			if i%64 == 63 {
				for _, f := range open {
					f.Sync()
					f.Close()
				}
				open = open[:0]
			}
		}
		for _, f := range open {
			f.Close()
		}
	})
}

// BenchmarkReadSmall reads back one short output of a stream file of
// many, as mqstat --cat of a selection does for each job.
func BenchmarkReadSmall(b *testing.B) {
	path := filepath.Join(b.TempDir(), "s.mqout")
	w, err := Create(path)
	if err != nil {
		b.Fatal(err)
	}
	exts := make([]Extent, 1000)
	for i := range exts {
		o := w.Output(Tag{Job: int64(i + 1), Attempt: 1}, 0)
		o.Write([]byte("line\n"))
		if exts[i], err = o.Close(); err != nil {
			b.Fatal(err)
		}
	}
	w.Close()
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		k := i % len(exts)
		if _, err := Read(io.Discard, f, Tag{Job: int64(k + 1), Attempt: 1}, exts[k]); err != nil {
			b.Fatal(err)
		}
	}
}
