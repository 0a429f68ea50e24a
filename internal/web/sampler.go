package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// sample is the CLS at one moment: what the overview shows and plots.
type sample struct {
	T time.Time
	// Queues are those the overview shows (at most maxQueueRows), More
	// the others summed (nil when none).
	Queues []protocol.QueueCounts
	More   *moreQueues
	Totals map[string]int // state letter -> jobs, every queue
	Sites  []Site
	Moved  *protocol.MovedTotals
	// Rates over the interval before T: jobs ended per second, and the
	// mean wait (submission to dispatch) of the jobs dispatched in it.
	Throughput float64
	MeanWait   float64
	HasWait    bool
	totals     totals
}

// update is the JSON an SSE "update" event carries to the overview.
type update struct {
	Time       string                 `json:"time"`
	Queues     []protocol.QueueCounts `json:"queues"`
	More       *moreQueues            `json:"more,omitempty"`
	Totals     map[string]int         `json:"totals"`
	Sites      []Site                 `json:"sites"`
	Throughput float64                `json:"throughput"`
	Moved      *protocol.MovedTotals  `json:"moved,omitempty"`
	// Plots are SVG the server rendered with html/template: the page puts
	// them in place as they are.
	Plots map[string]template.HTML `json:"plots"`
}

// sampler reads the Source every interval, keeps the last keep samples
// for the plots, and sends each update to every connected page.
type sampler struct {
	src      Source
	metrics  *Metrics
	interval time.Duration
	keep     int
	log      *slog.Logger

	mu      sync.Mutex
	history []sample
	last    map[string][]byte      // the latest update event per queue plotted, for new subscribers
	subs    map[chan []byte]string // the queue each page plots ("" = all)
	maxSubs int
}

// maxPlotted bounds the queues plotted at once: each is rendered every
// interval while a page follows it.
const maxPlotted = 8

// Why a page cannot follow the updates.
var (
	errTooManyPages  = errors.New("too many dashboard pages are open")
	errTooManyQueues = fmt.Errorf("at most %d queues are plotted at once: follow all queues, or close a page", maxPlotted)
)

func (s *sampler) run(ctx context.Context) {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.sample(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// sample takes one sample and broadcasts it.
func (s *sampler) sample(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	qs, err := s.src.Summary(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("dashboard: summary", "err", err)
		}
		return
	}
	sites, err := s.src.Sites(ctx)
	if err != nil {
		s.log.Warn("dashboard: sites", "err", err)
	}
	moved, _ := s.src.Moved(ctx)
	cur := sample{T: time.Now(), Queues: qs, Totals: map[string]int{}, Sites: sites, Moved: moved, totals: s.metrics.totals()}
	for _, q := range qs {
		for st, n := range q.Counts {
			cur.Totals[st] += n
		}
	}
	sort.Slice(cur.Queues, func(i, j int) bool { return cur.Queues[i].Queue < cur.Queues[j].Queue })
	cur.Queues, cur.More = shownQueues(cur.Queues)

	s.mu.Lock()
	if n := len(s.history); n > 0 {
		prev := s.history[n-1]
		if dt := cur.T.Sub(prev.T).Seconds(); dt > 0 {
			ended := (cur.totals.done + cur.totals.failed) - (prev.totals.done + prev.totals.failed)
			cur.Throughput = max(ended, 0) / dt
		}
		if dn := cur.totals.waitN - prev.totals.waitN; dn > 0 {
			cur.MeanWait, cur.HasWait = (cur.totals.waitSum-prev.totals.waitSum)/float64(dn), true
		}
	}
	s.history = append(s.history, cur)
	if len(s.history) > s.keep {
		s.history = append(s.history[:0], s.history[len(s.history)-s.keep:]...)
	}
	s.mu.Unlock()
	hist := s.snapshot()

	// No page open: nothing to render, nothing stale kept. Otherwise one
	// update per queue plotted (at most maxPlotted).
	evs := map[string][]byte{}
	for _, queue := range s.plotted() {
		u := update{Time: cur.T.UTC().Format(time.RFC3339), Queues: cur.Queues, More: cur.More, Totals: cur.Totals, Sites: cur.Sites,
			Throughput: cur.Throughput, Moved: cur.Moved, Plots: renderPlots(hist, queue)}
		b, err := json.Marshal(u)
		if err != nil {
			s.log.Warn("dashboard: update", "err", err)
			return
		}
		var ev bytes.Buffer
		ev.WriteString("event: update\ndata: ")
		ev.Write(b) // JSON has no raw newlines
		ev.WriteString("\n\n")
		evs[queue] = ev.Bytes()
	}
	s.broadcast(evs)
}

// maxQueueRows bounds the queues the overview shows, and keeps in its
// history for the plots: a CLS with thousands of queues would otherwise
// send every page megabytes a second and keep 15 minutes of them.
const maxQueueRows = 40

// moreQueues are the queues beyond maxQueueRows, summed.
type moreQueues struct {
	N      int            `json:"n"`
	Counts map[string]int `json:"counts"`
}

// shownQueues picks, of qs in name order, the queues the overview shows
// (those with jobs not ended first, then by name; in name order) and sums
// the others.
func shownQueues(qs []protocol.QueueCounts) ([]protocol.QueueCounts, *moreQueues) {
	if len(qs) <= maxQueueRows {
		return qs, nil
	}
	active := func(q protocol.QueueCounts) bool {
		for _, st := range []job.State{job.Waiting, job.Queued, job.Held, job.Prefetched, job.Executing} {
			if q.Counts[st.String()] > 0 {
				return true
			}
		}
		return false
	}
	order := make([]int, len(qs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return active(qs[order[a]]) && !active(qs[order[b]]) })
	keep := order[:maxQueueRows]
	sort.Ints(keep)
	shown := make([]protocol.QueueCounts, 0, maxQueueRows)
	more := &moreQueues{N: len(qs) - maxQueueRows, Counts: map[string]int{}}
	k := 0
	for i, q := range qs {
		if k < len(keep) && keep[k] == i {
			shown = append(shown, q)
			k++
			continue
		}
		for st, n := range q.Counts {
			more.Counts[st] += n
		}
	}
	return shown, more
}

// plotted lists the queues the open pages plot ("" = all queues).
func (s *sampler) plotted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var qs []string
	for _, q := range s.subs {
		if !slices.Contains(qs, q) {
			qs = append(qs, q)
		}
	}
	return qs
}

func (s *sampler) broadcast(evs map[string][]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = evs
	for ch, q := range s.subs {
		ev := evs[q]
		if ev == nil {
			continue // subscribed after the sample began: the next one
		}
		select {
		case ch <- ev:
		default: // a slow page misses this update, not the next
		}
	}
}

// subscribe returns a channel of update events whose jobs-per-state plot
// is of queue ("" = all queues), the latest first. It refuses a page too
// many, or a queue beyond maxPlotted.
func (s *sampler) subscribe(queue string) (ch chan []byte, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.subs) >= s.maxSubs {
		return nil, errTooManyPages
	}
	queues := map[string]bool{queue: true}
	for _, q := range s.subs {
		queues[q] = true
	}
	if len(queues) > maxPlotted {
		return nil, errTooManyQueues
	}
	ch = make(chan []byte, 1)
	if ev := s.last[queue]; ev != nil {
		ch <- ev
	}
	if s.subs == nil {
		s.subs = map[chan []byte]string{}
	}
	s.subs[ch] = queue
	return ch, nil
}

func (s *sampler) unsubscribe(ch chan []byte) {
	s.mu.Lock()
	delete(s.subs, ch)
	s.mu.Unlock()
}

// snapshot returns the history for a page being rendered.
// latest is the last sample, if there is one.
func (s *sampler) latest() (sample, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.history) == 0 {
		return sample{}, false
	}
	return s.history[len(s.history)-1], true
}

func (s *sampler) snapshot() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.history...)
}

// stateColors are the plot's colours per state letter.
var stateColors = map[job.State]string{
	job.Waiting: "#9e9e9e", job.Queued: "#1e88e5", job.Held: "#fdd835", job.Prefetched: "#ffcc80", job.Executing: "#fb8c00",
	job.Done: "#43a047", job.Failed: "#e53935", job.Blocked: "#8e24aa", job.Deleted: "#5d4037",
}

// renderPlots draws the overview's plots from the history: jobs per state
// of one queue, or of all ("").
func renderPlots(hist []sample, queue string) map[string]template.HTML {
	counts := make([]map[string]int, len(hist))
	for i, h := range hist {
		counts[i] = h.Totals
		if queue != "" {
			counts[i] = nil // the queue did not exist yet
			if k, ok := slices.BinarySearchFunc(h.Queues, queue, func(q protocol.QueueCounts, name string) int {
				return strings.Compare(q.Queue, name)
			}); ok {
				counts[i] = h.Queues[k].Counts
			}
		}
	}
	var lines []series
	for _, st := range job.States {
		if st == job.Deleted {
			continue
		}
		sr := seriesOf(st.Name(), stateColors[st])
		for i, h := range hist {
			if counts[i] != nil {
				sr.add(h.T, float64(counts[i][st.String()]))
			}
		}
		lines = append(lines, sr)
	}
	thr := seriesOf("jobs/s", "#43a047")
	wait := seriesOf("mean wait s", "#1e88e5")
	for _, h := range hist {
		thr.add(h.T, h.Throughput)
		if h.HasWait {
			wait.add(h.T, h.MeanWait)
		}
	}
	return map[string]template.HTML{
		"states":     plotSVG(statesTitle(queue), lines),
		"throughput": plotSVG("Throughput (jobs ended per second)", []series{thr}),
		"wait":       plotSVG("Queue wait (submission to dispatch, mean per interval)", []series{wait}),
	}
}

func statesTitle(queue string) string {
	if queue == "" {
		return "Jobs per state (all queues)"
	}
	return "Jobs per state in queue " + protocol.ClipText(queue, 40)
}
