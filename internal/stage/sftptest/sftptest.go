// Package sftptest is pkg/sftp's in-memory server made to keep the modes
// chmod sets, as a real server does (the in-memory handlers refuse a chmod
// of a directory and report fixed modes), for tests of what is made over
// SFTP and who could read it meanwhile.
package sftptest

import (
	"io"
	"os"
	"path"
	"slices"
	"sync"

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
