package stage

import (
	"io"
	"os"
	"path"
	"sync"

	"github.com/pkg/sftp"
)

// withModes makes pkg/sftp's in-memory handlers keep the modes chmod
// sets, as a real server does (they refuse a chmod of a directory and
// report fixed modes), and note each file made in a directory that was
// not made private first (made).
func withModes(h sftp.Handlers) sftp.Handlers {
	m := &modes{mem: h, mode: map[string]os.FileMode{}}
	h.FilePut, h.FileCmd, h.FileList = m, m, m
	return h
}

type modes struct {
	mem  sftp.Handlers
	mu   sync.Mutex
	mode map[string]os.FileMode
	// open lists the files made in a directory others could search.
	open []string
}

func (m *modes) Filewrite(r *sftp.Request) (io.WriterAt, error) {
	m.mu.Lock()
	if d, ok := m.mode[path.Dir(r.Filepath)]; !ok || d&0o077 != 0 {
		m.open = append(m.open, r.Filepath)
	}
	m.mu.Unlock()
	return m.mem.FilePut.Filewrite(r)
}

func (m *modes) Filecmd(r *sftp.Request) error {
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

func (m *modes) Filelist(r *sftp.Request) (sftp.ListerAt, error) {
	l, err := m.mem.FileList.Filelist(r)
	return modeLister{l, m, r}, err
}

func (m *modes) Lstat(r *sftp.Request) (sftp.ListerAt, error) {
	l, err := m.mem.FileList.(sftp.LstatFileLister).Lstat(r)
	return modeLister{l, m, r}, err
}

type modeLister struct {
	sftp.ListerAt
	m *modes
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

func (m *modes) PosixRename(r *sftp.Request) error {
	return m.mem.FileCmd.(sftp.PosixRenameFileCmder).PosixRename(r)
}
