package cls

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Followers are counted per job and in all: heartbeats learn which running
// attempts are followed, a staged chunk wakes the job's followers, and one
// follower beyond the bound is refused busy.
func TestOutputsFollowers(t *testing.T) {
	t.Parallel()
	o := &outputs{max: 2}
	running := []protocol.JobRef{{ID: 1, Attempt: 1}, {ID: 2, Attempt: 3}}
	if got := o.followed(running); got != nil {
		t.Errorf("followed with no follower: %v", got)
	}
	wake, leave1, err := o.join(2, false)
	if err != nil {
		t.Fatal(err)
	}
	_, leave2, err := o.join(2, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.followed(running); !slices.Equal(got, running[1:]) {
		t.Errorf("followed: %v, want job 2's attempt", got)
	}
	if _, _, err := o.join(1, false); err == nil || protocol.AsError(err).Code != protocol.CodeBusy {
		t.Errorf("a third follower: %v, want busy", err)
	}
	ch := wake()
	o.staged(1) // another job: no wake
	select {
	case <-ch:
		t.Fatal("woken by another job's output")
	default:
	}
	o.staged(2)
	select {
	case <-ch:
	default:
		t.Fatal("not woken by the job's output")
	}
	leave1()
	if got := o.followed(running); len(got) != 1 {
		t.Errorf("followed with one follower left: %v", got)
	}
	leave2()
	if got := o.followed(running); got != nil || len(o.watch) != 0 || o.followers != 0 {
		t.Errorf("after both left: followed %v, watch %v, followers %d", got, o.watch, o.followers)
	}
	if _, leave, err := o.join(1, false); err != nil {
		t.Errorf("a follower after the others left: %v", err)
	} else {
		leave()
	}
}

// The dashboard's followers have a budget of their own: however many pages
// follow output, mqstat --cat --follow (the socket's) still may, and the
// other way round.
func TestOutputsDashboardBudget(t *testing.T) {
	t.Parallel()
	o := &outputs{max: 3, dashMax: 2}
	var leaves []func()
	for i := range 2 {
		_, leave, err := o.join(int64(i+1), true)
		if err != nil {
			t.Fatalf("dashboard follower %d: %v", i, err)
		}
		leaves = append(leaves, leave)
	}
	if _, _, err := o.join(1, true); err == nil || protocol.AsError(err).Code != protocol.CodeBusy {
		t.Errorf("a dashboard follower past its budget: %v, want busy", err)
	}
	for i := range 3 {
		_, leave, err := o.join(1, false)
		if err != nil {
			t.Fatalf("socket follower %d with the dashboard's budget taken: %v", i, err)
		}
		leaves = append(leaves, leave)
	}
	if _, _, err := o.join(1, false); err == nil {
		t.Error("a socket follower past its bound")
	}
	for _, l := range leaves {
		l()
	}
	if o.followers != 0 || o.dash != 0 || len(o.watch) != 0 {
		t.Errorf("after all left: %d socket, %d dashboard, watch %v", o.followers, o.dash, o.watch)
	}
}

// tailStore is a job running (E) until end is closed, then done, whose
// stdout is the file out.
type tailStore struct {
	out string
	end chan struct{}
}

func (s *tailStore) JobOutput(context.Context, int64) (protocol.JobDetail, error) {
	st := "E"
	select {
	case <-s.end:
		st = "D"
	default:
	}
	return protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 1, State: st, Attempts: 1}, Stdout: s.out}, nil
}

func (s *tailStore) WaitFor(ctx context.Context, _ protocol.Wait) (protocol.WaitReply, error) {
	select {
	case <-s.end:
		return protocol.WaitReply{}, nil
	case <-ctx.Done():
		return protocol.WaitReply{}, ctx.Err()
	}
}

// The dashboard's stream of a running job starts at the last bytes written
// (followTail), not at the start of gigabytes, then follows what comes;
// mqstat's (tail 0) starts at the start.
func TestOutputFollowTail(t *testing.T) {
	t.Parallel()
	out := filepath.Join(t.TempDir(), "1.1.out")
	old := bytes.Repeat([]byte("x"), 200000)
	if err := os.WriteFile(out, append(old, "last line\n"...), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tail      int64
		wantFirst int64 // offset of the first frame
	}{{1000, 200010 - 1000}, {0, 0}, {1 << 20, 0}} {
		st := &tailStore{out: out, end: make(chan struct{})}
		o := &outputs{store: st, poll: 10 * time.Millisecond}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		var got bytes.Buffer
		first := int64(-1)
		ended := false
		appended := false
		for f, err := range o.seq(ctx, protocol.OutputQuery{ID: 1, Follow: true}, tc.tail, true) {
			if err != nil {
				t.Fatalf("tail %d: %v", tc.tail, err)
			}
			if f.End != nil {
				ended = true
				break
			}
			if first < 0 {
				first = f.Offset
			}
			got.Write(f.Data)
			if !appended && bytes.HasSuffix(got.Bytes(), []byte("last line\n")) {
				appended = true
				fh, err := os.OpenFile(out, os.O_APPEND|os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				fh.WriteString("more\n")
				fh.Close()
			}
			if bytes.HasSuffix(got.Bytes(), []byte("more\n")) {
				close(st.end)
			}
		}
		cancel()
		wantLen := 200010 + 5 - tc.wantFirst
		if first != tc.wantFirst || int64(got.Len()) != wantLen || !ended {
			t.Errorf("tail %d: first frame at %d (want %d), %d bytes (want %d), ended %v", tc.tail, first, tc.wantFirst, got.Len(), wantLen, ended)
		}
		// Restore the file for the next case.
		if err := os.WriteFile(out, append(old, "last line\n"...), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
