package stage

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/pkg/sftp"

	"github.com/mq-hpc/mq/internal/stage/sftptest"
)

// tmpfs mounts a tmpfs of size bytes on a new directory, unmounted at the
// end; it skips the test when that cannot be done (not root, no mount).
func tmpfs(t *testing.T, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs")
	}
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10)+",mode=0700", "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
			exec.Command("umount", "-l", dir).Run()
		}
	})
	return dir
}

// fillTo writes a file in dir until only about leave bytes are free.
func fillTo(t *testing.T, dir string, leave int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "fill")
	free := int64(st.Bavail) * st.Bsize
	if err := os.WriteFile(name, make([]byte, max(free-leave, 0)), 0o600); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
	return name
}

// TestMoveToFullDisk: a transfer to a place whose disk is full fails with
// ErrNoSpace (SFTP says only "Failure": the server's statvfs tells),
// leaving no temporary file; a file larger than the room left is not
// started at all; once room is back the same transfer succeeds. A
// failure with room to spare is not taken for a full disk.
func TestMoveToFullDisk(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			srcDir, dstDir := t.TempDir(), tmpfs(t, 2<<20)
			small, large := randomBytes(512<<10, 1), randomBytes(3<<20, 2)
			writeFile(t, filepath.Join(srcDir, "d", "small"), small)
			writeFile(t, filepath.Join(srcDir, "d", "large"), large)
			ps := places{"src": Dir{Root: srcDir}, "dst": k.make(t, dstDir)}
			m := &Mover{Places: ps.get}
			ctx := context.Background()

			// Room to spare: a failure of another kind is not "no space".
			writeFile(t, filepath.Join(dstDir, "f"), []byte("a file, not a directory"))
			writeFile(t, filepath.Join(srcDir, "f", "x"), []byte("x"))
			if res := m.Move(ctx, Transfer{Path: "/f/x", From: "src", To: "dst", Size: -1}); res.Err == nil || errors.Is(res.Err, ErrNoSpace) {
				t.Errorf("a file where a directory should be: %v, want an error other than ErrNoSpace", res.Err)
			}

			fill := fillTo(t, dstDir, 64<<10)
			res := m.Move(ctx, Transfer{Path: "/d/small", From: "src", To: "dst", Size: int64(len(small))})
			var ns *NoSpaceError
			if !errors.Is(res.Err, ErrNoSpace) || !errors.As(res.Err, &ns) {
				t.Fatalf("move to a full disk: %v, want ErrNoSpace", res.Err)
			}
			noLeftovers(t, dstDir, filepath.Join(dstDir, "d", "small"))

			os.Remove(fill)
			fill = fillTo(t, dstDir, 1<<20)
			res = m.Move(ctx, Transfer{Path: "/d/large", From: "src", To: "dst", Size: int64(len(large))})
			if !errors.As(res.Err, &ns) || ns.Need != int64(len(large)) || ns.Free < 0 || res.Bytes != 0 {
				t.Fatalf("a file larger than the room left: %v (%d bytes sent), want a NoSpaceError before sending", res.Err, res.Bytes)
			}
			noLeftovers(t, dstDir, filepath.Join(dstDir, "d", "large"))

			os.Remove(fill)
			if res := m.Move(ctx, Transfer{Path: "/d/small", From: "src", To: "dst", Size: int64(len(small)), SHA256: sum(small)}); res.Err != nil {
				t.Fatalf("once room is back: %v", res.Err)
			}
		})
	}
}

// quotaClient serves an in-memory filesystem over SFTP whose writes fail
// with a bare "Failure" to files whose name holds fail(), or to every file
// while over is set (as a user's full quota does), and whose statvfs
// tells nothing.
func quotaClient(tb testing.TB, over *atomic.Bool, fail string) *sftp.Client {
	tb.Helper()
	_, h := sftptest.New()
	h.FilePut = quotaPut{h.FilePut, over, fail}
	a, b := socketPair(tb)
	srv := sftp.NewRequestServer(b, h)
	go srv.Serve()
	c, err := sftp.NewClientPipe(a, a, sftp.UseConcurrentWrites(true))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	return c
}

type quotaPut struct {
	sftp.FileWriter
	over *atomic.Bool
	fail string
}

func (q quotaPut) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	w, err := q.FileWriter.Filewrite(r)
	if err != nil {
		return nil, err
	}
	return quotaWriter{w, q.over, q.fail != "" && strings.Contains(r.Filepath, q.fail)}, nil
}

type quotaWriter struct {
	io.WriterAt
	over *atomic.Bool
	fail bool
}

func (w quotaWriter) WriteAt(b []byte, off int64) (int, error) {
	if w.fail || w.over.Load() {
		return 0, errors.New("write failed") // SSH_FX_FAILURE, as OpenSSH says for EDQUOT
	}
	return w.WriterAt.WriteAt(b, off)
}

// TestMoveOverQuota: over SFTP, a write that fails with a bare "Failure"
// where statvfs shows no want of room (a user's quota full; here a server
// that tells no room at all) is taken for no room when a one-block file
// cannot be written there either; a write failing for the one file only
// is not; once the quota has room the transfer succeeds; no probe stays.
func TestMoveOverQuota(t *testing.T) {
	src := t.TempDir()
	data := randomBytes(256<<10, 3)
	writeFile(t, filepath.Join(src, "d", "in"), data)
	writeFile(t, filepath.Join(src, "d", "bad"), data)
	var over atomic.Bool
	c := quotaClient(t, &over, "bad")
	const root = "/mq-quota-test-root"
	// The in-memory server makes no missing parents: the directories are
	// there, as a data root used before.
	for _, d := range []string{root, root + "/d"} {
		if err := c.Mkdir(d); err != nil {
			t.Fatal(err)
		}
	}
	m := &Mover{Places: places{"src": Dir{Root: src}, "dst": SFTP{Client: c, Root: root, Writer: "w"}}.get}
	ctx := context.Background()

	if res := m.Move(ctx, Transfer{Path: "/d/bad", From: "src", To: "dst", Size: int64(len(data))}); res.Err == nil || errors.Is(res.Err, ErrNoSpace) {
		t.Errorf("a write failing for one file: %v, want an error other than ErrNoSpace", res.Err)
	}
	over.Store(true)
	res := m.Move(ctx, Transfer{Path: "/d/in", From: "src", To: "dst", Size: int64(len(data))})
	if !errors.Is(res.Err, ErrNoSpace) || !strings.Contains(res.Err.Error(), "a quota full?") {
		t.Fatalf("over quota: %v, want ErrNoSpace", res.Err)
	}
	over.Store(false)
	if res := m.Move(ctx, Transfer{Path: "/d/in", From: "src", To: "dst", Size: int64(len(data)), SHA256: sum(data)}); res.Err != nil {
		t.Fatalf("with room again: %v", res.Err)
	}
	ents, err := c.ReadDir(root + "/d")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "in" {
		t.Errorf("left at the target: %q, want in alone", names)
	}
}
