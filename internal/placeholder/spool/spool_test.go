package spool

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

func reports(n int) []protocol.Report {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	var rs []protocol.Report
	for i := range n {
		rs = append(rs, protocol.Report{ID: int64(i + 1), Attempt: 1, Exit: i % 3, Started: t0, Finished: t0.Add(time.Hour),
			Streamed: []protocol.Streamed{{Stream: "stdout", File: protocol.StreamFileName(7, 1), Last: int64(i), Bytes: 1}}})
	}
	return rs
}

// deliver runs Deliver on dir for this user, gathering what it applies
// and what it logs.
func deliver(t *testing.T, dir string, apply func(File) error) (got []File, n int, logged string, err error) {
	t.Helper()
	var log bytes.Buffer
	if apply == nil {
		apply = func(f File) error { got = append(got, f); return nil }
	}
	n, err = Deliver(OS{}, dir, os.Getuid(), apply, slog.New(slog.NewTextHandler(&log, nil)))
	return got, n, log.String(), err
}

func names(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var ns []string
	for _, e := range es {
		ns = append(ns, e.Name())
	}
	return ns
}

// TestRoundTrip: reports written read back the same, from private files,
// which are removed once applied; many reports take several files, each
// within the bounds.
func TestRoundTrip(t *testing.T) {
	for _, n := range []int{1, 3, maxReports + 5} {
		dir := filepath.Join(t.TempDir(), Dir)
		want := reports(n)
		wrote, err := Write(dir, 7, 0, want)
		if err != nil || wrote != n {
			t.Fatalf("Write %d: %d, %v", n, wrote, err)
		}
		if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
			t.Fatalf("spool dir: %v, %v; want mode 0700", fi, err)
		}
		files := names(t, dir)
		if len(files) != (n+maxReports-1)/maxReports {
			t.Errorf("%d reports in %d files: %v", n, len(files), files)
		}
		for _, name := range files {
			fi, err := os.Lstat(filepath.Join(dir, name))
			if err != nil || fi.Mode() != 0o600 || fi.Size() > MaxBytes || !strings.HasSuffix(name, Suffix) {
				t.Errorf("%s: %v, %v: want a private file of at most %d bytes", name, fi, err, MaxBytes)
			}
		}
		got, applied, logged, err := deliver(t, dir, nil)
		if err != nil || applied != n || logged != "" {
			t.Fatalf("Deliver: %d, %v, log %q", applied, err, logged)
		}
		var all []protocol.Report
		for _, f := range got {
			if f.Placeholder != 7 {
				t.Errorf("placeholder %d, want 7", f.Placeholder)
			}
			all = append(all, f.Reports...)
		}
		slices.SortFunc(all, func(a, b protocol.Report) int { return int(a.ID - b.ID) })
		if !reflect.DeepEqual(all, want) {
			t.Errorf("read back other reports than written")
		}
		if left := names(t, dir); len(left) != 0 {
			t.Errorf("left after delivery: %v", left)
		}
	}
}

// TestWriteBounds: a report that alone passes a file's bound is refused,
// and so is a placeholder of no id; nothing is left behind.
func TestWriteBounds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	big := reports(2)
	big[1].OutputLost = strings.Repeat("x", MaxBytes)
	n, err := Write(dir, 7, 0, big)
	if n != 1 || err == nil || !strings.Contains(err.Error(), "report of job 2") {
		t.Errorf("Write of a report over the bound: %d, %v", n, err)
	}
	if _, err := Write(dir, 0, 0, reports(1)); err == nil {
		t.Error("Write for placeholder 0: no error")
	}
	for _, name := range names(t, dir) {
		if strings.HasPrefix(name, tmpPrefix) {
			t.Errorf("left a temporary file: %s", name)
		}
	}
}

// TestWriteRefusesDir: an agent never spools into a directory others
// could write or that is a link (its reports could be swapped).
func TestWriteRefusesDir(t *testing.T) {
	base := t.TempDir()
	open := filepath.Join(base, "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	os.Chmod(open, 0o777)
	if _, err := Write(open, 7, 0, reports(1)); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("Write into a directory all can write: %v", err)
	}
	link := filepath.Join(base, "link")
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(link, 7, 0, reports(1)); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Write through a link: %v", err)
	}
}

// TestDeliverSetsAside: files the CLS cannot trust or use are set aside
// (NAME.bad), each with a line in the log, and the good one beside them
// is applied; a file being written (a crash mid-write) is neither.
func TestDeliverSetsAside(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	if _, err := Write(dir, 7, 0, reports(1)); err != nil {
		t.Fatal(err)
	}
	good := names(t, dir)[0]
	put := func(name, data string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return name
	}
	valid := `{"mq_spool":1,"placeholder":7,"reports":[{"id":9,"attempt":1}]}`
	bad := []string{
		put("1-garbage"+Suffix, "not json", 0o600),
		put("1-truncated"+Suffix, valid[:40], 0o600),
		put("1-version"+Suffix, `{"mq_spool":2,"placeholder":7,"reports":[{"id":9,"attempt":1}]}`, 0o600),
		put("1-noph"+Suffix, `{"mq_spool":1,"placeholder":0,"reports":[{"id":9,"attempt":1}]}`, 0o600),
		put("1-none"+Suffix, `{"mq_spool":1,"placeholder":7,"reports":[]}`, 0o600),
		put("1-nojob"+Suffix, `{"mq_spool":1,"placeholder":7,"reports":[{"id":0,"attempt":1}]}`, 0o600),
		put("1-noattempt"+Suffix, `{"mq_spool":1,"placeholder":7,"reports":[{"id":9,"attempt":0}]}`, 0o600),
		put("1-trailing"+Suffix, valid+valid, 0o600),
		put("1-offset"+Suffix, `{"mq_spool":1,"placeholder":7,"reports":[{"id":9,"attempt":1}],"clock_offset_ms":1e30}`, 0o600),
		put("1-writable"+Suffix, valid, 0o622),
		put("1-huge"+Suffix, `{"mq_spool":1,"placeholder":7,"reports":[{"id":9,"attempt":1,"reason":"`+strings.Repeat("x", MaxBytes)+`"}]}`, 0o600),
		put("1-objects"+Suffix, `{"mq_spool":1,"placeholder":7,"reports":[`+strings.Repeat(`{"id":9,"attempt":1},`, protocol.MaxPeerObjects)+`{"id":9,"attempt":1}]}`, 0o600),
	}
	if err := os.Symlink(filepath.Join(dir, good), filepath.Join(dir, "1-link"+Suffix)); err != nil {
		t.Fatal(err)
	}
	bad = append(bad, "1-link"+Suffix)
	if err := os.Mkdir(filepath.Join(dir, "1-dir"+Suffix), 0o700); err != nil {
		t.Fatal(err)
	}
	bad = append(bad, "1-dir"+Suffix)
	other := put("1-other"+Suffix, valid, 0o600)
	if err := os.Lchown(filepath.Join(dir, other), 4242, 4242); err == nil { // as root only
		bad = append(bad, other)
	} else {
		os.Remove(filepath.Join(dir, other))
	}
	tmp := put(tmpPrefix+"half", valid[:30], 0o600)
	got, n, logged, err := deliver(t, dir, nil)
	if err != nil || n != 1 || len(got) != 1 || got[0].Reports[0].ID != 1 {
		t.Fatalf("Deliver: %d reports %v, %v; want the good file's alone", n, got, err)
	}
	want := []string{tmp}
	for _, b := range bad {
		want = append(want, b+badSuffix)
	}
	left := names(t, dir)
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
	if lines := strings.Count(logged, "\n"); lines != len(bad) {
		t.Errorf("%d lines logged for %d files set aside:\n%s", lines, len(bad), logged)
	}
	// Set aside, they are not read again.
	if _, n, logged, err := deliver(t, dir, nil); n != 0 || logged != "" || err != nil {
		t.Errorf("second Deliver: %d, %v, log %q", n, err, logged)
	}
}

// TestDeliverRefusesDir: a spool directory that is not the user's own
// private directory is not read at all.
func TestDeliverRefusesDir(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, Dir)
	if _, err := Write(dir, 7, 0, reports(1)); err != nil {
		t.Fatal(err)
	}
	apply := func(File) error { t.Error("applied a file of a directory not to trust"); return nil }
	os.Chmod(dir, 0o777)
	if _, _, _, err := deliver(t, dir, apply); err == nil || !strings.Contains(err.Error(), "writable by others") {
		t.Errorf("Deliver of a directory all can write: %v", err)
	}
	os.Chmod(dir, 0o700)
	link := filepath.Join(base, "link")
	os.Symlink(dir, link)
	if _, _, _, err := deliver(t, link, apply); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("Deliver through a link: %v", err)
	}
	if _, err := Deliver(OS{}, dir, os.Getuid()+1, apply, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "belongs to uid") {
		t.Errorf("Deliver of another user's directory: %v", err)
	}
	if _, n, _, err := deliver(t, filepath.Join(base, "none"), apply); n != 0 || err != nil {
		t.Errorf("Deliver of no spool: %d, %v", n, err)
	}
}

// TestDeliverApplyFails: a file whose reports the CLS refuses is set
// aside; one it cannot record now (a full disk, a store closing) stays,
// and the delivery stops there, for the next one.
func TestDeliverApplyFails(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	if _, err := Write(dir, 7, 0, reports(1)); err != nil {
		t.Fatal(err)
	}
	name := names(t, dir)[0]
	full := errors.New("database or disk is full")
	if _, n, _, err := deliver(t, dir, func(File) error { return full }); n != 0 || !errors.Is(err, full) {
		t.Errorf("Deliver, apply failing: %d, %v", n, err)
	}
	if left := names(t, dir); !slices.Equal(left, []string{name}) {
		t.Errorf("left %v, want %s kept", left, name)
	}
	refused := CheckRefused(protocol.Errorf(protocol.CodeForbidden, "placeholder 7 is not of this site"))
	_, n, logged, err := deliver(t, dir, func(File) error { return refused })
	if n != 0 || err != nil || !strings.Contains(logged, "not of this site") {
		t.Errorf("Deliver, apply refusing: %d, %v, log %q", n, err, logged)
	}
	if left := names(t, dir); !slices.Equal(left, []string{name + badSuffix}) {
		t.Errorf("left %v, want %s set aside", left, name)
	}
}

// TestDeliverStaleTemp: a file left being written an hour ago (its agent
// died mid-write) is removed; a newer one is left to its writer.
func TestDeliverStaleTemp(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	old, fresh := filepath.Join(dir, tmpPrefix+"old"), filepath.Join(dir, tmpPrefix+"new")
	for _, p := range []string{old, fresh} {
		if err := os.WriteFile(p, []byte(`{"mq_spool":1,`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	then := time.Now().Add(-2 * staleTemp)
	os.Chtimes(old, then, then)
	if _, n, logged, err := deliver(t, dir, nil); n != 0 || err != nil || logged != "" {
		t.Errorf("Deliver: %d, %v, %q", n, err, logged)
	}
	if left := names(t, dir); !slices.Equal(left, []string{tmpPrefix + "new"}) {
		t.Errorf("left %v", left)
	}
}
