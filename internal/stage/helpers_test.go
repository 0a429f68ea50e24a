package stage

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/pkg/sftp"
)

// socketPair is a connected pair of Unix sockets: unlike net.Pipe it is
// buffered by the kernel, as a real connection is.
func socketPair(tb testing.TB) (net.Conn, net.Conn) {
	tb.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		tb.Fatal(err)
	}
	conn := func(fd int) net.Conn {
		f := os.NewFile(uintptr(fd), "socketpair")
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			tb.Fatal(err)
		}
		return c
	}
	return conn(fds[0]), conn(fds[1])
}

// sftpClient serves the local filesystem over SFTP in-process (the server
// pkg/sftp has, standing in for OpenSSH's sftp-server) and returns a
// client made as login.SSH makes its own.
func sftpClient(tb testing.TB) *sftp.Client {
	tb.Helper()
	a, b := socketPair(tb)
	srv, err := sftp.NewServer(b)
	if err != nil {
		tb.Fatal(err)
	}
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

// places is a set of named places for tests.
type places map[string]Place

func (ps places) get(name string) (Place, error) {
	if p, ok := ps[name]; ok {
		return p, nil
	}
	return nil, os.ErrNotExist
}

// kind makes a Place with its files under dir.
type kind struct {
	name string
	make func(tb testing.TB, dir string) Place
}

var kinds = []kind{
	{"dir", func(tb testing.TB, dir string) Place { return Dir{Root: dir} }},
	{"sftp", func(tb testing.TB, dir string) Place { return SFTP{Client: sftpClient(tb), Root: dir} }},
}

func writeFile(tb testing.TB, name string, data []byte) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(name, data, 0o644); err != nil {
		tb.Fatal(err)
	}
}

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// noLeftovers fails if dir holds a temporary file or, when absent is
// given, that file.
func noLeftovers(tb testing.TB, dir string, absent ...string) {
	tb.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), TempSuffix) {
			tb.Errorf("temporary file left behind: %s", p)
		}
		return nil
	})
	for _, a := range absent {
		if _, err := os.Lstat(a); !os.IsNotExist(err) {
			tb.Errorf("%s exists (%v), want it absent", a, err)
		}
	}
}

// hook wraps a Place to watch and steer what a Mover does with it.
type hook struct {
	Place
	onOpen func(io.ReadCloser) io.ReadCloser
	opens  chan string
}

func (h *hook) Open(ctx context.Context, p string) (io.ReadCloser, Info, error) {
	r, info, err := h.Place.Open(ctx, p)
	if h.opens != nil {
		h.opens <- p
	}
	if err == nil && h.onOpen != nil {
		r = h.onOpen(r)
	}
	return r, info, err
}

// readFunc is a ReadCloser from a function (hiding any WriterTo).
type readFunc struct {
	read  func([]byte) (int, error)
	close func() error
}

func (r readFunc) Read(b []byte) (int, error) { return r.read(b) }
func (r readFunc) Close() error               { return r.close() }

// generated is a read-only Place of one file of Size bytes made on the
// fly, never held in memory.
type generated struct {
	Place
	Size int64
}

func (g generated) Open(ctx context.Context, p string) (io.ReadCloser, Info, error) {
	return io.NopCloser(io.LimitReader(&pattern{}, g.Size)), Info{Size: g.Size, Regular: true}, nil
}

// pattern is an endless stream of pseudo-random bytes, made 4 KiB at a
// time.
type pattern struct {
	buf [4096]byte
	n   uint64
	off int
}

func (p *pattern) Read(b []byte) (int, error) {
	total := 0
	for len(b) > 0 {
		if p.off == 0 {
			r := rand.New(rand.NewPCG(p.n, 7))
			for i := 0; i < len(p.buf); i += 8 {
				v := r.Uint64()
				for j := range 8 {
					p.buf[i+j] = byte(v >> (8 * j))
				}
			}
			p.n++
		}
		k := copy(b, p.buf[p.off:])
		p.off = (p.off + k) % len(p.buf)
		b = b[k:]
		total += k
	}
	return total, nil
}

// patternSum is the SHA-256 of the first n bytes of a pattern.
func patternSum(n int64) string {
	h := sha256.New()
	io.Copy(h, io.LimitReader(&pattern{}, n))
	return hex.EncodeToString(h.Sum(nil))
}

var _ = bytes.Equal
