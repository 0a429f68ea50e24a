package room

import (
	"errors"
	"log/slog"
	"syscall"
	"testing"
	"time"
)

// TestWatch: with room, nothing is refused; after a failure for want of
// room, calls get its answer until the filesystem has MinFree free and a
// probe goes through; a probe that found no room is not made again for
// probeEvery; back is said once.
func TestWatch(t *testing.T) {
	full := errors.New("the disk is full")
	probeErr, probes := error(syscall.ENOSPC), 0
	w := Watch{Dir: t.TempDir(), Probe: func() error { probes++; return probeErr }}
	t0 := time.Unix(1000, 0)
	if ans, back := w.Check(t0); ans != nil || back || w.Short() {
		t.Fatalf("before any failure: %v, %v", ans, back)
	}
	w.Full(full, false)
	for _, step := range []struct {
		at     time.Duration
		room   bool // the probe's answer
		want   error
		back   bool
		probes int // made so far
	}{
		{at: 0, want: full, probes: 1},
		{at: probeEvery / 2, want: full, probes: 1}, // too soon to probe again
		{at: probeEvery, want: full, probes: 2},
		{at: 2 * probeEvery, room: true, back: true, probes: 3},
		{at: 3 * probeEvery, probes: 3}, // room: no probe
	} {
		if step.room {
			probeErr = nil
		}
		ans, back := w.Check(t0.Add(step.at))
		if ans != step.want || back != step.back || probes != step.probes || w.Short() != (step.want != nil) {
			t.Errorf("at %v: %v, back %v, %d probes; want %v, back %v, %d probes", step.at, ans, back, probes, step.want, step.back, step.probes)
		}
	}

	// MinFree beyond the filesystem: no room whatever the probe says,
	// and no probe is made.
	w = Watch{Dir: t.TempDir(), MinFree: 1 << 62, Probe: func() error { probes++; return nil }}
	probes = 0
	w.Full(full, false)
	if ans, back := w.Check(t0); ans != full || back || probes != 0 {
		t.Errorf("below MinFree: %v, back %v, %d probes; want the answer, no probe", ans, back, probes)
	}
	w.MinFree = 1
	if ans, back := w.Check(t0); ans != nil || !back || probes != 1 {
		t.Errorf("MinFree free: %v, back %v, %d probes; want room back after one probe", ans, back, probes)
	}
}

// TestProbedDefault: without a Probe, a directory with room has room.
func TestProbedDefault(t *testing.T) {
	if err := (&Watch{Dir: t.TempDir()}).Probed(); err != nil {
		t.Fatal(err)
	}
}

// TestWatchLocked: after a failure for another process's lock, room is
// back when the lock probe says the lock is free, whatever the free
// space (MinFree beyond the filesystem here) and the room probe say.
func TestWatchLocked(t *testing.T) {
	locked := errors.New("database is locked")
	lockErr, lockProbes, probes := error(locked), 0, 0
	w := Watch{Dir: t.TempDir(), MinFree: 1 << 62,
		Probe:     func() error { probes++; return syscall.ENOSPC },
		ProbeLock: func() error { lockProbes++; return lockErr }}
	t0 := time.Unix(1000, 0)
	w.Full(locked, true)
	if ans, back := w.Check(t0); ans != locked || back || lockProbes != 1 {
		t.Errorf("locked: %v, back %v, %d lock probes; want the answer after 1", ans, back, lockProbes)
	}
	lockErr = nil
	if ans, back := w.Check(t0.Add(probeEvery)); ans != nil || !back || lockProbes != 2 || probes != 0 {
		t.Errorf("lock free: %v, back %v, %d lock probes, %d room probes; want back", ans, back, lockProbes, probes)
	}
	w.Full(locked, false) // a full disk now: the lock probe is not asked
	if ans, _ := w.Check(t0.Add(2 * probeEvery)); ans != locked || lockProbes != 2 {
		t.Errorf("full: %v, %d lock probes", ans, lockProbes)
	}
}

// TestWatchBegin: a transaction is begun unless the lock is known held
// by another process: then the answer is given without trying; a full
// disk does not stop a transaction (deletes free room).
func TestWatchBegin(t *testing.T) {
	answer := errors.New("another process holds the write lock")
	tests := []struct {
		name      string
		full      bool
		locked    bool
		want      error
		wantBegun bool
	}{
		{"room", false, false, nil, true},
		{"full disk", true, false, nil, true},
		{"locked", true, true, answer, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var w Watch
			if tc.full {
				w.Full(answer, tc.locked)
			}
			begun := false
			err := w.Begin(func() error { begun = true; return nil })
			if err != tc.want || begun != tc.wantBegun || w.Locked() != tc.locked {
				t.Errorf("Begin = %v, begun %v, Locked %v; want %v, %v, %v", err, begun, w.Locked(), tc.want, tc.wantBegun, tc.locked)
			}
		})
	}
}

// busy is SQLite's answer to a write lock another process holds.
type busy struct{}

func (busy) Error() string { return "database is locked (5) (SQLITE_BUSY)" }
func (busy) Code() int     { return 5 }

// TestWatchBeginFresh: a begin that finds the lock held is noted, so the
// next is answered at once without beginning; other failures are not.
func TestWatchBeginFresh(t *testing.T) {
	other := errors.New("disk I/O error")
	tests := []struct {
		name       string
		err        error
		wantLocked bool
	}{
		{"free", nil, false},
		{"locked", busy{}, true},
		{"other failure", other, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := Watch{Dir: t.TempDir()}
			err := w.BeginFresh(func() error { return tc.err }, slog.New(slog.DiscardHandler))
			if (err == nil) != (tc.err == nil) || w.Locked() != tc.wantLocked || w.Short() != tc.wantLocked {
				t.Fatalf("BeginFresh = %v, Locked %v, Short %v; want locked %v", err, w.Locked(), w.Short(), tc.wantLocked)
			}
			if !tc.wantLocked {
				return
			}
			begun := false
			if again := w.BeginFresh(func() error { begun = true; return nil }, slog.New(slog.DiscardHandler)); again != err || begun {
				t.Errorf("second BeginFresh = %v, begun %v; want %v at once", again, begun, err)
			}
		})
	}
}
