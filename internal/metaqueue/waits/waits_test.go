package waits

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

var (
	t0      = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	errRead = errors.New("read failed")
	errStop = errors.New("stopping")
)

// harness is the core's side: which jobs are still to end, how each
// ended, the callers' replies and contexts, and the answers given.
type harness struct {
	t        *testing.T
	ws       Waits[string]
	running  map[int64]bool
	bad      map[int64]bool // reading how it ended fails
	replies  map[string]*protocol.WaitReply
	cancels  map[string]context.CancelFunc
	answered map[string]error
}

func newHarness(t *testing.T, running ...int64) *harness {
	h := &harness{t: t, running: map[int64]bool{}, bad: map[int64]bool{},
		replies: map[string]*protocol.WaitReply{}, cancels: map[string]context.CancelFunc{}, answered: map[string]error{}}
	for _, id := range running {
		h.running[id] = true
	}
	return h
}

func (h *harness) end(id int64) (protocol.JobEnd, error) {
	if h.bad[id] {
		return protocol.JobEnd{}, errRead
	}
	return protocol.JobEnd{ID: id, State: "D"}, nil
}

func (h *harness) start(call string, req Request) {
	ctx, cancel := context.WithCancel(context.Background())
	h.t.Cleanup(cancel)
	h.cancels[call] = cancel
	reply := &protocol.WaitReply{}
	h.replies[call] = reply
	parked, err := h.ws.Start(ctx, call, req, reply, func(id int64) bool { return h.running[id] }, h.end)
	if err != nil || !parked {
		h.answered[call] = err
	}
}

// finish ends jobs and tells the waits, as a batch commits.
func (h *harness) finish(ids ...int64) {
	for _, id := range ids {
		delete(h.running, id)
	}
	h.answer(h.ws.Ended(ids, h.end))
}

func (h *harness) answer(done []*Wait[string]) {
	for _, w := range done {
		if _, ok := h.answered[w.Call]; ok {
			h.t.Errorf("%s answered twice", w.Call)
		}
		h.answered[w.Call] = w.Err()
	}
}

// answer is what one caller was answered.
type answer struct {
	err           error
	jobs, pending []int64
}

func TestWaits(t *testing.T) {
	tests := []struct {
		name    string
		running []int64
		run     func(h *harness)
		want    map[string]answer // calls answered; every other is parked
		listed  int               // waits listed at the end
	}{
		{
			name: "all ended before",
			run:  func(h *harness) { h.start("a", Request{IDs: []int64{1, 2}}) },
			want: map[string]answer{"a": {jobs: []int64{1, 2}}},
		},
		{
			name:    "parked until the last ends",
			running: []int64{2, 3},
			run: func(h *harness) {
				h.start("a", Request{IDs: []int64{1, 2, 3}})
				h.finish(2)
			},
			want:   map[string]answer{},
			listed: 1,
		},
		{
			name:    "answered when the last ends",
			running: []int64{2, 3},
			run: func(h *harness) {
				h.start("a", Request{IDs: []int64{1, 2, 3}})
				h.finish(3)
				h.finish(4, 2)
			},
			want: map[string]answer{"a": {jobs: []int64{1, 3, 2}}},
		},
		{
			name:    "any with one ended before",
			running: []int64{2, 3},
			run:     func(h *harness) { h.start("a", Request{IDs: []int64{2, 1, 3}, Any: true}) },
			want:    map[string]answer{"a": {jobs: []int64{1}, pending: []int64{2, 3}}},
		},
		{
			name:    "any gets every job of the batch",
			running: []int64{1, 2, 3},
			run: func(h *harness) {
				h.start("a", Request{IDs: []int64{1, 2, 3}, Any: true})
				h.finish(2, 1)
			},
			want:   map[string]answer{"a": {jobs: []int64{2, 1}, pending: []int64{3}}},
			listed: 1, // under 3 until the sweep
		},
		{
			name:    "two waits on one job",
			running: []int64{1, 2},
			run: func(h *harness) {
				h.start("a", Request{IDs: []int64{1}})
				h.start("b", Request{IDs: []int64{1, 2}})
				h.finish(1)
			},
			want:   map[string]answer{"a": {jobs: []int64{1}}},
			listed: 1,
		},
		{
			name: "reading an end fails at start",
			run: func(h *harness) {
				h.bad[1] = true
				h.start("a", Request{IDs: []int64{1}})
			},
			want: map[string]answer{"a": {err: errRead}},
		},
		{
			name:    "reading an end fails later",
			running: []int64{1, 2},
			run: func(h *harness) {
				h.start("a", Request{IDs: []int64{1, 2}})
				h.bad[1] = true
				h.finish(1)
			},
			want:   map[string]answer{"a": {err: errRead}},
			listed: 1, // under 2 until the sweep
		},
		{
			name:    "deadline",
			running: []int64{1, 2, 3},
			run: func(h *harness) {
				h.start("a", Request{IDs: []int64{1, 2}, Deadline: t0})
				h.start("b", Request{IDs: []int64{3}, Deadline: t0.Add(time.Minute)})
				h.start("c", Request{IDs: []int64{3}})
				h.finish(1)
				h.answer(h.ws.Expire(t0)) // not after it yet
				h.answer(h.ws.Expire(t0.Add(time.Second)))
				h.answer(h.ws.Expire(t0.Add(2 * time.Second)))
				h.answer(h.ws.Sweep())
			},
			want:   map[string]answer{"a": {jobs: []int64{1}, pending: []int64{2}}},
			listed: 2,
		},
		{
			name:    "a job ending after the deadline answered changes nothing",
			running: []int64{1, 2},
			run: func(h *harness) {
				h.start("a", Request{IDs: []int64{1, 2}, Deadline: t0})
				h.answer(h.ws.Expire(t0.Add(time.Second)))
				h.finish(1, 2)
			},
			want: map[string]answer{"a": {pending: []int64{1, 2}}},
		},
		{
			name:    "caller gone",
			running: []int64{1, 2},
			run: func(h *harness) {
				h.start("a", Request{IDs: []int64{1, 2}})
				h.start("b", Request{IDs: []int64{2}})
				h.cancels["a"]()
				h.finish(1) // a batch answers what ended, not who left
				h.answer(h.ws.Sweep())
			},
			want:   map[string]answer{"a": {err: context.Canceled, jobs: []int64{1}}},
			listed: 1,
		},
		{
			name:    "a failed batch drops its waits unanswered",
			running: []int64{1, 2},
			run: func(h *harness) {
				h.start("a", Request{IDs: []int64{1, 2}})
				h.start("b", Request{IDs: []int64{2}})
				h.ws.Drop(func(c string) bool { return c == "a" })
				h.finish(1, 2)
			},
			want: map[string]answer{"b": {jobs: []int64{2}}},
		},
		{
			name:    "close",
			running: []int64{1, 2},
			run: func(h *harness) {
				h.start("a", Request{IDs: []int64{1, 2}})
				h.start("b", Request{IDs: []int64{2}})
				h.finish(2)
				h.answer(h.ws.Close(errStop))
			},
			want: map[string]answer{"a": {err: errStop, jobs: []int64{2}}, "b": {jobs: []int64{2}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, tt.running...)
			tt.run(h)
			for call, reply := range h.replies {
				err, answered := h.answered[call]
				want, ok := tt.want[call]
				if answered != ok {
					t.Errorf("%s answered: %v, want %v", call, answered, ok)
					continue
				}
				if !ok {
					continue
				}
				if !errors.Is(err, want.err) {
					t.Errorf("%s: error %v, want %v", call, err, want.err)
				}
				var jobs []int64
				for _, e := range reply.Jobs {
					jobs = append(jobs, e.ID)
				}
				pending := slices.Sorted(slices.Values(reply.Pending))
				if !slices.Equal(jobs, want.jobs) || !slices.Equal(pending, want.pending) {
					t.Errorf("%s: jobs %v pending %v, want %v and %v", call, jobs, pending, want.jobs, want.pending)
				}
			}
			if n := h.ws.Len(); n != tt.listed {
				t.Errorf("%d waits listed, want %d", n, tt.listed)
			}
		})
	}
}
