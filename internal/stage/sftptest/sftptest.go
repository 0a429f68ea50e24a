// Package sftptest is pkg/sftp's in-memory server made to keep the modes
// chmod sets, as a real server does (the in-memory handlers refuse a chmod
// of a directory and report fixed modes), for tests of what is made over
// SFTP and who could read it meanwhile.
package sftptest

import (
	"io"
	"net"
	"os"
	"path"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/pkg/sftp"
)

// New returns the handlers of an in-memory SFTP server that keeps modes,
// and the Server that notes each file made in a directory that was not
// made private first (Open).
func New() (*Server, sftp.Handlers) {
	h := sftp.InMemHandler()
	m := &Server{mem: h, mode: map[string]os.FileMode{}}
	h.FilePut, h.FileCmd, h.FileList = m, m, m
	return m, h
}

// Open lists the files made in a directory others could search (since
// Forget).
func (m *Server) Open() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.open)
}

// Forget forgets the files Open lists: a test's own setup.
func (m *Server) Forget() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.open = nil
}

// A Server is in-memory SFTP handlers that keep modes.
type Server struct {
	mem  sftp.Handlers
	mu   sync.Mutex
	mode map[string]os.FileMode
	// open lists the files made in a directory others could search.
	open []string
}

func (m *Server) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	m.mu.Lock()
	if d, ok := m.mode[path.Dir(r.Filepath)]; !ok || d&0o077 != 0 {
		m.open = append(m.open, r.Filepath)
	}
	m.mu.Unlock()
	return m.mem.FilePut.Filewrite(r)
}

func (m *Server) Filecmd(r *sftp.Request) error {
	if r.Method == "Setstat" && r.AttrFlags().Permissions && !r.AttrFlags().Size {
		m.mu.Lock()
		m.mode[r.Filepath] = r.Attributes().FileMode().Perm()
		m.mu.Unlock()
		return nil
	}
	if r.Method == "Rmdir" || r.Method == "Remove" {
		m.mu.Lock()
		delete(m.mode, r.Filepath)
		m.mu.Unlock()
	}
	return m.mem.FileCmd.Filecmd(r)
}

func (m *Server) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	l, err := m.mem.FileList.Filelist(r)
	return modeLister{l, m, r}, err
}

func (m *Server) Lstat(r *sftp.Request) (sftp.ListerAt, error) {
	l, err := m.mem.FileList.(sftp.LstatFileLister).Lstat(r)
	return modeLister{l, m, r}, err
}

type modeLister struct {
	sftp.ListerAt
	m *Server
	r *sftp.Request
}

func (l modeLister) ListAt(fis []os.FileInfo, off int64) (int, error) {
	n, err := l.ListerAt.ListAt(fis, off)
	l.m.mu.Lock()
	defer l.m.mu.Unlock()
	for i := range fis[:n] {
		name := l.r.Filepath // Stat, Lstat
		if l.r.Method == "List" {
			name = path.Join(name, fis[i].Name())
		}
		if p, ok := l.m.mode[name]; ok {
			fis[i] = modeInfo{fis[i], fis[i].Mode()&^os.ModePerm | p}
		}
	}
	return n, err
}

// modeInfo is a FileInfo with the mode chmod set.
type modeInfo struct {
	os.FileInfo
	mode os.FileMode
}

func (m modeInfo) Mode() os.FileMode { return m.mode }

func (m *Server) PosixRename(r *sftp.Request) error {
	return m.mem.FileCmd.(sftp.PosixRenameFileCmder).PosixRename(r)
}

// A Hang makes the handlers it wraps (Handlers) stop answering while it
// is on: an sftp-server hung on its filesystem (a home directory on an
// NFS mount that stopped answering), its connection up, so that sshd
// still answers keepalives. Requests wait until it is off or Released.
type Hang struct {
	on   atomic.Bool
	end  chan struct{}
	once sync.Once
}

// NewHang returns a Hang, off.
func NewHang() *Hang { return &Hang{end: make(chan struct{})} }

// Set turns it on or off; requests waiting already wait on until Release.
func (h *Hang) Set(on bool) { h.on.Store(on) }

// Release ends every wait, for good: a test's cleanup.
func (h *Hang) Release() { h.once.Do(func() { close(h.end) }) }

func (h *Hang) wait() {
	if h.on.Load() {
		<-h.end
	}
}

// Handlers wraps hs: every request waits while h is on.
func (h *Hang) Handlers(hs sftp.Handlers) sftp.Handlers {
	return sftp.Handlers{
		FileGet:  hangGet{hs.FileGet, h},
		FilePut:  hangPut{hs.FilePut, h},
		FileCmd:  hangCmd{hs.FileCmd, h},
		FileList: hangList{hs.FileList, h},
	}
}

type hangGet struct {
	sftp.FileReader
	h *Hang
}

func (g hangGet) Fileread(r *sftp.Request) (io.ReaderAt, error) {
	g.h.wait()
	return g.FileReader.Fileread(r)
}

type hangPut struct {
	sftp.FileWriter
	h *Hang
}

func (p hangPut) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	p.h.wait()
	return p.FileWriter.Filewrite(r)
}

type hangCmd struct {
	sftp.FileCmder
	h *Hang
}

func (c hangCmd) Filecmd(r *sftp.Request) error {
	c.h.wait()
	return c.FileCmder.Filecmd(r)
}

func (c hangCmd) PosixRename(r *sftp.Request) error {
	c.h.wait()
	return c.FileCmder.(sftp.PosixRenameFileCmder).PosixRename(r)
}

type hangList struct {
	sftp.FileLister
	h *Hang
}

func (l hangList) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	l.h.wait()
	return l.FileLister.Filelist(r)
}

func (l hangList) Lstat(r *sftp.Request) (sftp.ListerAt, error) {
	l.h.wait()
	if ls, ok := l.FileLister.(sftp.LstatFileLister); ok {
		return ls.Lstat(r)
	}
	return l.FileLister.Filelist(r)
}

// Serve serves hs in process and returns a client made as login.SSH makes
// its own, and the client's end of the connection: closing it cuts the
// connection, failing every request waiting on it. A Hang in hs must be
// Released before the server closes: register its cleanup after Serve.
func Serve(tb testing.TB, hs sftp.Handlers) (*sftp.Client, net.Conn) {
	tb.Helper()
	a, b := net.Pipe()
	srv := sftp.NewRequestServer(b, hs)
	go srv.Serve()
	c, err := sftp.NewClientPipe(a, a, sftp.UseConcurrentWrites(true))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		c.Close()
		srv.Close()
	})
	return c, a
}
