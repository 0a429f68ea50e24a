package web

import (
	"bytes"
	"context"
	"encoding/json"
	"html/template"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// sample is the CLS at one moment: what the overview shows and plots.
type sample struct {
	T      time.Time
	Queues []protocol.QueueCounts
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
	last    []byte // the latest update event, for new subscribers
	subs    map[chan []byte]struct{}
	maxSubs int
}

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

	if !s.watched() {
		s.broadcast(nil) // no page open: nothing to render, nothing stale kept
		return
	}
	u := update{Time: cur.T.UTC().Format(time.RFC3339), Queues: cur.Queues, Totals: cur.Totals, Sites: cur.Sites,
		Throughput: cur.Throughput, Moved: cur.Moved, Plots: renderPlots(hist)}
	b, err := json.Marshal(u)
	if err != nil {
		s.log.Warn("dashboard: update", "err", err)
		return
	}
	var ev bytes.Buffer
	ev.WriteString("event: update\ndata: ")
	ev.Write(b) // JSON has no raw newlines
	ev.WriteString("\n\n")
	s.broadcast(ev.Bytes())
}

// watched says whether a page follows the updates.
func (s *sampler) watched() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.subs) > 0
}

func (s *sampler) broadcast(ev []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = ev
	if ev == nil {
		return
	}
	for ch := range s.subs {
		select {
		case ch <- ev:
		default: // a slow page misses this update, not the next
		}
	}
}

// subscribe returns a channel of update events, the latest first; ok is
// false when too many pages are connected.
func (s *sampler) subscribe() (ch chan []byte, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.subs) >= s.maxSubs {
		return nil, false
	}
	ch = make(chan []byte, 1)
	if s.last != nil {
		ch <- s.last
	}
	if s.subs == nil {
		s.subs = map[chan []byte]struct{}{}
	}
	s.subs[ch] = struct{}{}
	return ch, true
}

func (s *sampler) unsubscribe(ch chan []byte) {
	s.mu.Lock()
	delete(s.subs, ch)
	s.mu.Unlock()
}

// snapshot returns the history for a page being rendered.
func (s *sampler) snapshot() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]sample(nil), s.history...)
}

// stateColors are the plot's colours per state letter.
var stateColors = map[job.State]string{
	job.Waiting: "#9e9e9e", job.Queued: "#1e88e5", job.Executing: "#fb8c00",
	job.Done: "#43a047", job.Failed: "#e53935", job.Blocked: "#8e24aa", job.Deleted: "#5d4037",
}

// renderPlots draws the overview's plots from the history.
func renderPlots(hist []sample) map[string]template.HTML {
	var lines []series
	for _, st := range job.States {
		if st == job.Deleted {
			continue
		}
		sr := seriesOf(st.Name(), stateColors[st])
		for _, h := range hist {
			sr.add(h.T, float64(h.Totals[st.String()]))
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
		"states":     plotSVG("Jobs per state", lines),
		"throughput": plotSVG("Throughput (jobs ended per second)", []series{thr}),
		"wait":       plotSVG("Queue wait (submission to dispatch, mean per interval)", []series{wait}),
	}
}
