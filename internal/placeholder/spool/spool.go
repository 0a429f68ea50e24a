// Package spool keeps the reports a placeholder agent could not deliver:
// an agent that gives up on its CLS (unreachable past its reconnect time)
// or is stopped with reports the CLS never acknowledged writes them to a
// spool directory under its output directory, and the CLS applies them,
// as that placeholder's own report, when it next serves the site.
//
// A spool file is written whole or not at all (a temporary file, synced,
// renamed into place, the directory synced), so a crash mid-write leaves
// nothing that reads as valid. The CLS trusts nothing in it it did not
// check: the directory and file must be the user's own, no link, not
// writable by group or others, within MaxBytes, and every report is
// checked as a peer's would be (see Read). Applying a file twice (a crash
// between its commit and its removal) is harmless: a report of an attempt
// that already ended is a late report, and changes nothing.
package spool

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Dir is the spool's directory under an agent's output directory (--out).
const Dir = "spool"

// MaxBytes bounds one spool file: a frame, the most one report request
// may carry.
const MaxBytes = protocol.MaxFrame

// maxReports bounds the reports of one file, well under the objects a
// peer's request may hold (protocol.MaxPeerObjects).
const maxReports = 4096

// Suffix ends a spool file's name; tmpPrefix begins a file being written,
// which a reader never takes; badSuffix is added to a file set aside.
const (
	Suffix    = ".reports"
	tmpPrefix = ".tmp-"
	badSuffix = ".bad"
)

// version is the format of a spool file (File.Spool).
const version = 1

// File is a spool file's content: reports of one placeholder.
type File struct {
	Spool       int               `json:"mq_spool"`
	Placeholder int64             `json:"placeholder"`
	Reports     []protocol.Report `json:"reports"`
	// ClockOffsetMS is how far the CLS's clock was ahead of the agent's
	// (protocol.RegisterReply.Clock) when they last talked, in
	// milliseconds; absent (0): not known, the reports' times are taken
	// as they are. The CLS moves the reports' times by it (OnCLSClock),
	// as it moves live reports' (protocol.OnClock): when it reads the
	// file it has nothing left to compare them with.
	ClockOffsetMS int64 `json:"clock_offset_ms,omitempty"`
}

// MaxClockOffset bounds File.ClockOffsetMS: a node's clock more than a
// year off the CLS's is not believed, and the reports' times are taken
// as they are.
const MaxClockOffset = 366 * 24 * time.Hour

// OnCLSClock moves the times of f's reports onto the CLS's clock by the
// offset the agent recorded (protocol.OnClock: only past
// protocol.MaxClockSkew), and returns the difference moved (0: none).
// An offset beyond MaxClockOffset moves nothing, and is the error.
func (f *File) OnCLSClock() (time.Duration, error) {
	lim := MaxClockOffset.Milliseconds()
	if f.ClockOffsetMS > lim || f.ClockOffsetMS < -lim {
		return 0, fmt.Errorf("clock offset %d ms, beyond %v", f.ClockOffsetMS, MaxClockOffset)
	}
	// Any instant shows the offset: the CLS's now and the agent's then.
	now := time.Now()
	return protocol.OnClock(f.Reports, now.Add(-time.Duration(f.ClockOffsetMS)*time.Millisecond), now), nil
}

// Write writes reports of placeholder ph to spool directory dir, making
// it (0700) if needed, in as many files as the bounds ask, with offset,
// how far the CLS's clock is ahead of this host's (File.ClockOffsetMS; 0:
// not known). It returns how many reports it wrote: on an error (a full
// disk) the rest are not.
func Write(dir string, ph int64, offset time.Duration, reports []protocol.Report) (int, error) {
	if ph <= 0 {
		return 0, fmt.Errorf("spool: placeholder %d", ph)
	}
	made := false
	if err := os.Mkdir(dir, 0o700); err == nil {
		made = true
	} else if !errors.Is(err, fs.ErrExist) {
		return 0, fmt.Errorf("spool: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return 0, fmt.Errorf("spool: %w", err)
	}
	if err := checkDir(dir, fi, ownerOS(fi), os.Getuid()); err != nil {
		return 0, err
	}
	if made {
		syncDir(filepath.Dir(dir)) // the spool's own entry
	}
	done := 0
	for len(reports) > 0 {
		n, data, err := encode(File{Spool: version, Placeholder: ph, ClockOffsetMS: offset.Milliseconds()}, reports)
		if err != nil {
			return done, err
		}
		if err := writeFile(dir, fileName(ph), data); err != nil {
			return done, err
		}
		done += n
		reports = reports[n:]
	}
	return done, nil
}

// Save is Write for an agent: it logs what it spooled, or why not (a
// full disk), and goes on.
func Save(dir string, ph int64, offset time.Duration, reports []protocol.Report, log *slog.Logger) {
	n, err := Write(dir, ph, offset, reports)
	if err != nil {
		log.Error("could not spool the reports the CLS did not take: their jobs run again", "dir", dir, "reports", len(reports)-n, "err", err)
	}
	if n > 0 {
		log.Warn("spooled the reports the CLS did not take, for it to apply when it serves this site again", "dir", dir, "reports", n)
	}
}

// encode encodes the first reports that fit one file f, and says how
// many.
func encode(f File, reports []protocol.Report) (int, []byte, error) {
	n := min(len(reports), maxReports)
	for {
		f.Reports = reports[:n]
		data, err := json.Marshal(f)
		if err != nil {
			return 0, nil, fmt.Errorf("spool: %w", err)
		}
		if len(data) <= MaxBytes {
			return n, data, nil
		}
		if n == 1 {
			return 0, nil, fmt.Errorf("spool: the report of job %d is %d bytes, over %d", reports[0].ID, len(data), MaxBytes)
		}
		n /= 2
	}
}

func fileName(ph int64) string {
	return strconv.FormatInt(ph, 10) + "-" + strings.ToLower(rand.Text()[:12]) + Suffix
}

// writeFile writes data to dir/name whole or not at all.
func writeFile(dir, name string, data []byte) (err error) {
	f, err := os.CreateTemp(dir, tmpPrefix+"*") // 0600
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
			err = fmt.Errorf("spool: %w", err)
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), filepath.Join(dir, name)); err != nil {
		return err
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// checkDir checks a spool directory: a directory, no link, owned by uid,
// not writable by group or others (who could put reports in it, or
// rename the user's away).
func checkDir(dir string, fi fs.FileInfo, owner, uid int) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("spool %s is a symbolic link", dir)
	case !fi.IsDir():
		return fmt.Errorf("spool %s is not a directory", dir)
	case owner != uid:
		return fmt.Errorf("spool %s belongs to uid %d, not this user (%d)", dir, owner, uid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("spool %s is writable by others (mode %v)", dir, fi.Mode().Perm())
	}
	return nil
}

// Decode decodes and checks a spool file's content, as the server checks
// a placeholder's report batch: within the bounds, a placeholder, every
// report naming an attempt, and each cleaned (protocol.CleanReport) so
// that what its job's files put in it is taken.
func Decode(data []byte) (File, error) {
	var f File
	if len(data) > MaxBytes {
		return f, fmt.Errorf("%d bytes, over %d", len(data), MaxBytes)
	}
	if err := protocol.CheckObjects(data, protocol.MaxPeerObjects); err != nil {
		return f, err
	}
	d := json.NewDecoder(bytes.NewReader(data))
	if err := d.Decode(&f); err != nil {
		return f, fmt.Errorf("not a spool file: %w", err)
	}
	if d.More() {
		return f, errors.New("not a spool file: data after its end")
	}
	switch {
	case f.Spool != version:
		return f, fmt.Errorf("spool format %d, not %d", f.Spool, version)
	case f.Placeholder <= 0:
		return f, fmt.Errorf("placeholder %d", f.Placeholder)
	case len(f.Reports) == 0 || len(f.Reports) > maxReports:
		return f, fmt.Errorf("%d reports (1..%d)", len(f.Reports), maxReports)
	}
	for i := range f.Reports {
		r := &f.Reports[i]
		if r.ID <= 0 || r.Attempt <= 0 {
			return f, fmt.Errorf("a report of job %d attempt %d", r.ID, r.Attempt)
		}
		protocol.CleanReport(r)
	}
	return f, nil
}

func ownerOS(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}
