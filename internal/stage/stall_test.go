package stage

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pkg/sftp"

	"github.com/mq-hpc/mq/internal/stage/sftptest"
)

// stallingSFTP serves an in-memory filesystem over SFTP that, while stall
// is set, stops answering reads and writes past the first MiB of a file:
// an sftp-server hung mid-transfer (its filesystem gone), the connection
// up. It returns the client and the client's end of the connection.
func stallingSFTP(tb testing.TB, stall *atomic.Bool) (*sftp.Client, net.Conn) {
	tb.Helper()
	_, h := sftptest.New()
	hung := make(chan struct{})
	h.FilePut = stallPut{h.FilePut, stall, hung}
	h.FileGet = stallGet{h.FileGet, stall, hung}
	a, b := socketPair(tb)
	srv := sftp.NewRequestServer(b, h)
	go srv.Serve()
	c, err := sftp.NewClientPipe(a, a, sftp.UseConcurrentWrites(true))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		close(hung)
		c.Close()
		srv.Close()
	})
	return c, a
}

type stallPut struct {
	sftp.FileWriter
	stall *atomic.Bool
	hung  chan struct{}
}

func (p stallPut) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	w, err := p.FileWriter.Filewrite(r)
	return stallWriterAt{w, p.stall, p.hung}, err
}

type stallWriterAt struct {
	io.WriterAt
	stall *atomic.Bool
	hung  chan struct{}
}

func (w stallWriterAt) WriteAt(b []byte, off int64) (int, error) {
	if off >= 1<<20 && w.stall.Load() {
		<-w.hung
	}
	return w.WriterAt.WriteAt(b, off)
}

type stallGet struct {
	sftp.FileReader
	stall *atomic.Bool
	hung  chan struct{}
}

func (g stallGet) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	rd, err := g.FileReader.Fileread(r)
	return stallReaderAt{rd, g.stall, g.hung}, err
}

type stallReaderAt struct {
	io.ReaderAt
	stall *atomic.Bool
	hung  chan struct{}
}

func (r stallReaderAt) ReadAt(b []byte, off int64) (int, error) {
	if off >= 1<<20 && r.stall.Load() {
		<-r.hung
	}
	return r.ReaderAt.ReadAt(b, off)
}

// A transfer whose SFTP server stops answering mid-file, its connection
// up, is given up once it has moved no byte for the Mover's Stall, with
// ErrStalled, and its connection is cut (SFTP.Drop), whichever way the
// file goes; nothing is left at a local target.
func TestMoveStalledSFTP(t *testing.T) {
	const size = 4 << 20
	data := randomBytes(size, 9)
	for _, upload := range []bool{true, false} {
		name := map[bool]string{true: "upload", false: "download"}[upload]
		t.Run(name, func(t *testing.T) {
			var stall, cut atomic.Bool
			c, conn := stallingSFTP(t, &stall)
			remote := SFTP{Client: c, Root: "/data", Drop: func() bool { cut.Store(true); conn.Close(); return true }}
			dir := t.TempDir()
			local := Dir{Root: dir}
			if upload {
				writeFile(t, filepath.Join(dir, "in", "big"), data)
			} else {
				tmp, err := remote.Create(context.Background(), "/in/big")
				if err == nil {
					_, err = tmp.Write(data)
				}
				if err == nil {
					err = tmp.Commit(context.Background())
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			stall.Store(true)
			ps := places{"local": local, "site": remote}
			m := &Mover{Places: ps.get, Stall: 300 * time.Millisecond}
			tr := Transfer{Path: "/in/big", From: "local", To: "site", Size: size, SHA256: sum(data)}
			if !upload {
				tr.From, tr.To = "site", "local"
				os.Remove(filepath.Join(dir, "in", "big"))
			}
			done := make(chan Result, 1)
			go func() { done <- m.Move(context.Background(), tr) }()
			select {
			case res := <-done:
				if !errors.Is(res.Err, ErrStalled) {
					t.Fatalf("a transfer through a hung SFTP server: %v; want ErrStalled", res.Err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("a transfer through a hung SFTP server still waits after 30 s")
			}
			if !cut.Load() {
				t.Error("the stalled connection was not cut")
			}
			if !upload {
				noLeftovers(t, dir, filepath.Join(dir, "in", "big"))
			}
		})
	}
}

// slowSource is a read-only Place of one file of size bytes that gives at
// most 32 KiB a read, every pause.
type slowSource struct {
	Place
	size  int64
	pause time.Duration
}

func (s slowSource) Open(ctx context.Context, p string) (io.ReadCloser, Info, error) {
	r := io.LimitReader(&pattern{}, s.size)
	read := func(b []byte) (int, error) {
		time.Sleep(s.pause)
		return r.Read(b[:min(len(b), 32<<10)])
	}
	return readFunc{read, func() error { return nil }}, Info{Size: s.size, Regular: true}, nil
}

// A transfer slower in all than the Mover's Stall, but moving, is not
// cut: only a stretch with no byte moved counts.
func TestMoveSlowNotStalled(t *testing.T) {
	const size = 1 << 20
	var stall, cut atomic.Bool
	c, conn := stallingSFTP(t, &stall)
	remote := SFTP{Client: c, Root: "/data", Drop: func() bool { cut.Store(true); conn.Close(); return true }}
	ps := places{"slow": slowSource{size: size, pause: 50 * time.Millisecond}, "site": remote}
	m := &Mover{Places: ps.get, Stall: 500 * time.Millisecond}
	start := time.Now()
	res := m.Move(context.Background(), Transfer{Path: "/in/slow", From: "slow", To: "site", Size: size, SHA256: patternSum(size)})
	if res.Err != nil {
		t.Fatalf("a slow transfer: %v", res.Err)
	}
	if took := time.Since(start); took < 2*m.Stall {
		t.Fatalf("the slow transfer took %s, not longer than its Stall: the test proves nothing", took)
	}
	if cut.Load() {
		t.Error("a slow transfer's connection was cut")
	}
}

// TestStallCtxErrAtOnce: a move's context under the stall watch says a
// flight's cancel as soon as the flight's own Err does (at the next
// chunk), not a goroutine's turn later, megabytes on.
func TestStallCtxErrAtOnce(t *testing.T) {
	for range 100 {
		waiter, cancel := context.WithCancel(context.Background())
		flight := newFlightCtx(waiter)
		ctx, _, stop := watchStall(flight, time.Hour)
		cancel()
		if err := ctx.Err(); !errors.Is(err, context.Canceled) {
			t.Fatalf("Err just after the only waiter's cancel: %v, want context.Canceled", err)
		}
		stop()
		flight.release()
	}
}

// TestStallSaysCut: a stall's error says a connection was cut only where
// a place watched has one (a Cutter) and its Cut cut it, a session ended
// where only that was, and nothing for the CLS host's own files.
func TestStallSaysCut(t *testing.T) {
	for _, c := range []struct {
		name         string
		places       []Place
		cut, session bool
	}{
		{"local", []Place{Dir{Root: t.TempDir()}}, false, false},
		{"sftp", []Place{SFTP{Drop: func() bool { return true }}}, true, false},
		{"sftp session", []Place{SFTP{Drop: func() bool { return false }}}, false, true},
		{"sftp both ends", []Place{SFTP{Drop: func() bool { return false }}, SFTP{Drop: func() bool { return true }}}, true, false},
	} {
		ctx, w, stop := watchStall(context.Background(), 10*time.Millisecond, c.places...)
		<-ctx.Done() // the watch gives the transfer up: nothing moves
		stop()
		err := w.err()
		if !errors.Is(err, ErrStalled) || strings.Contains(err.Error(), "connection was cut") != c.cut ||
			strings.Contains(err.Error(), "SFTP session was ended") != c.session {
			t.Errorf("%s: %v; want ErrStalled, saying a connection was cut: %v, a session ended: %v", c.name, err, c.cut, c.session)
		}
	}
}
