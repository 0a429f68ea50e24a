package site

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path"
	"time"

	"github.com/pkg/sftp"

	"github.com/mq-hpc/mq/internal/placeholder/spool"
	"github.com/mq-hpc/mq/internal/site/login"
)

// SpoolEvery is how often the CLS looks at a site's spool again while its
// connection to the login host lasts: a placeholder may give up on the
// CLS (its reconnect time over) just after the connection was made, and
// its reports must be applied before its jobs' leases lapse.
const SpoolEvery = 10 * time.Second

// spoolLocked starts a delivery of the spool on r: at once on a
// connection just made, else once SpoolEvery has passed since the last.
func (s *Remote) spoolLocked(r login.Runner, made bool) {
	every := cmp.Or(s.spoolEvery, SpoolEvery)
	if s.Reports == nil || !made && time.Since(s.spooled) < every {
		return
	}
	s.spooled = time.Now()
	go s.deliverSpool(r, s.base, s.Spec.Name) // Spec is read under mu (Retarget)
}

// deliverSpool applies the reports this site's placeholders spooled
// when they lost the CLS (package spool), read over the SFTP session of
// r, a prepared connection to the login host: in the output directory the CLS gave them there (base/out; a site whose nodes
// do not share it with the login host keeps theirs out of its reach). It
// runs on its own goroutine, one at a time: the SFTP calls take no
// context, and a stuck sftp-server must hold nothing of the site's.
func (s *Remote) deliverSpool(r login.Runner, base, name string) {
	if !s.spooling.CompareAndSwap(false, true) {
		return // the delivery of an earlier connection still runs
	}
	defer s.spooling.Store(false)
	log := s.log().With("site", name)
	n, err := s.readSpool(r, base, log)
	if n > 0 {
		log.Info("applied the reports placeholders of the site spooled when they lost their CLS", "reports", n)
	}
	if err != nil {
		log.Warn("cannot apply the reports placeholders of the site spooled; their jobs run again when their leases run out", "err", err)
	}
}

func (s *Remote) readSpool(r login.Runner, base string, log *slog.Logger) (int, error) {
	f, ok := r.(interface{ SFTP() (*sftp.Client, error) })
	if !ok {
		return 0, nil
	}
	c, err := f.SFTP()
	if err != nil {
		return 0, err
	}
	fsys := sftpSpool{c}
	out := path.Join(base, "out")
	fi, err := fsys.Lstat(out)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil // no placeholder ran here yet
	}
	if err != nil {
		return 0, err
	}
	if !fi.IsDir() {
		return 0, fmt.Errorf("%s is not a directory", out)
	}
	// The CLS made out (prepare's mkdir): its owner is the login user.
	return spool.Deliver(fsys, path.Join(out, spool.Dir), fsys.Owner(fi), func(f spool.File) error {
		return s.Reports(context.Background(), f)
	}, log)
}

// sftpSpool is a login host's filesystem, as spool.Deliver reads it.
type sftpSpool struct{ c *sftp.Client }

func (f sftpSpool) Lstat(name string) (fs.FileInfo, error)     { return f.c.Lstat(name) }
func (f sftpSpool) ReadDir(name string) ([]fs.FileInfo, error) { return f.c.ReadDir(name) }
func (f sftpSpool) Rename(oldname, newname string) error       { return f.c.Rename(oldname, newname) }
func (f sftpSpool) Remove(name string) error                   { return f.c.Remove(name) }

// Open follows a link at name, unlike Lstat: spool.Deliver checks the
// file it opened again, through the open handle.
func (f sftpSpool) Open(name string) (spool.Handle, error) { return f.c.Open(name) }

func (sftpSpool) Owner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*sftp.FileStat); ok {
		return int(st.UID)
	}
	return -1
}
