package purge

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/metaqueue/internal/modtest"
	"github.com/mq-hpc/mq/protocol"
)

// streamsDir makes an output directory with its streams directory.
func streamsDir(t *testing.T) (out, dir string) {
	out = t.TempDir()
	dir = filepath.Join(out, protocol.StreamDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return out, dir
}

// TestRemoveStreams: a stream file goes once no extent names it and no
// agent holds it; a named, held, recent, header-only, misnamed, linked or
// non-regular one stays.
func TestRemoveStreams(t *testing.T) {
	ctx := context.Background()
	w := modtest.NewDB(t)
	out, dir := streamsDir(t)
	chunky := "MQSTRM01" + string(make([]byte, 100))
	old := time.Now().Add(-time.Hour)
	write := func(name, data string, mtime time.Time) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, mtime, mtime); err != nil {
			t.Fatal(err)
		}
		return p
	}
	gone := write(protocol.StreamFileName(1, 0), chunky, old)
	gone2 := write(protocol.StreamFileName(2, 3), chunky, old)
	keep := map[string]string{
		"named":       write(protocol.StreamFileName(1, 1), chunky, old),
		"held":        write(protocol.StreamFileName(3, 0), chunky, old),
		"recent":      write(protocol.StreamFileName(4, 0), chunky, time.Now()),
		"header only": write(protocol.StreamFileName(5, 0), "MQSTRM01", old),
		"misnamed":    write("1-01.mqs", chunky, old),
		"other":       write("notes.txt", chunky, old),
	}
	link := filepath.Join(dir, protocol.StreamFileName(6, 0))
	if err := os.Symlink(gone, link); err != nil {
		t.Fatal(err)
	}
	keep["link"] = link
	sub := filepath.Join(dir, protocol.StreamFileName(7, 0))
	if err := os.Mkdir(sub, 0o700); err != nil {
		t.Fatal(err)
	}
	keep["directory"] = sub
	exec(t, w, "INSERT INTO output_extents (job_id, attempt, stream, placeholder_id, file, last, bytes) VALUES (9, 1, 0, 1, ?, 8, 3)", protocol.StreamFileName(1, 1))
	holder, err := os.Open(keep["held"])
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if err := syscall.Flock(int(holder.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}

	n, err := RemoveStreams(ctx, w, out, StreamGrace, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(2 * len(chunky)); n != want {
		t.Errorf("freed %d bytes, want %d", n, want)
	}
	for _, p := range []string{gone, gone2} {
		if _, err := os.Lstat(p); !os.IsNotExist(err) {
			t.Errorf("%s: still there (%v)", filepath.Base(p), err)
		}
	}
	for why, p := range keep {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s file %s removed: %v", why, filepath.Base(p), err)
		}
	}
	if n, err := RemoveStreams(ctx, w, "", StreamGrace, time.Now()); n != 0 || err != nil {
		t.Errorf("no output dir: %d, %v; want 0, nil", n, err)
	}
	if n, err := RemoveStreams(ctx, w, t.TempDir(), StreamGrace, time.Now()); n != 0 || err != nil {
		t.Errorf("no streams dir: %d, %v; want 0, nil", n, err)
	}
}

// TestCountStreams: a dry run counts the stream files the purge would
// remove, those only its jobs' extents (or none) name, and removes none.
func TestCountStreams(t *testing.T) {
	ctx := context.Background()
	w := modtest.NewDB(t)
	out, dir := streamsDir(t)
	old := time.Now().Add(-time.Hour)
	write := func(name string, size int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, append([]byte("MQSTRM01"), make([]byte, size)...), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		return p
	}
	only, shared, orphan := protocol.StreamFileName(1, 0), protocol.StreamFileName(2, 0), protocol.StreamFileName(3, 0)
	files := []string{write(only, 100), write(shared, 1000), write(orphan, 10)}
	extent := "INSERT INTO output_extents (job_id, attempt, stream, placeholder_id, file, last, bytes) VALUES (?, ?, ?, 1, ?, 8, 3)"
	exec(t, w, extent, 7, 1, 0, only)   // job 7's first attempt: stdout and stderr
	exec(t, w, extent, 7, 1, 1, only)   //
	exec(t, w, extent, 7, 2, 0, shared) // its second attempt's stdout
	exec(t, w, extent, 8, 1, 0, shared) // job 8, which stays, names shared too

	going := Going{}
	if err := going.Add(ctx, w, []Row{{ID: 7}}); err != nil {
		t.Fatal(err)
	}
	if going[only] != 2 || going[shared] != 1 {
		t.Fatalf("going = %v, want %s: 2, %s: 1", going, only, shared)
	}
	n, err := CountStreams(ctx, w, out, StreamGrace, time.Now(), going)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(8+100) + int64(8+10); n != want {
		t.Errorf("would free %d bytes, want %d (%s and the orphan %s)", n, want, only, orphan)
	}
	for _, p := range files {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("a dry run removed %s: %v", filepath.Base(p), err)
		}
	}
	if n, err := CountStreams(ctx, w, out, StreamGrace, time.Now(), nil); n != 8+10 || err != nil {
		t.Errorf("nothing going: %d, %v; want the orphan's 18 bytes", n, err)
	}
}
