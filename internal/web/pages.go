package web

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mq-hpc/mq/internal/metaqueue/inspect"
	"github.com/mq-hpc/mq/internal/outstream"

	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// pageSize is how many jobs a listing page shows.
const pageSize = 100

type overviewData struct {
	Root  string // rootOf the page
	S     sample
	Plots map[string]template.HTML
	Queue string // the queue whose jobs per state are plotted ("" = all)
}

// plotQueue reads ?queue=, the queue a page plots the jobs per state of.
func plotQueue(w http.ResponseWriter, r *http.Request) (string, bool) {
	q := r.URL.Query().Get("queue")
	if len(q) > 256 {
		http.Error(w, "a queue name is at most 256 bytes", http.StatusBadRequest)
		return "", false
	}
	return q, true
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	queue, ok := plotQueue(w, r)
	if !ok {
		return
	}
	hist := s.smp.snapshot()
	if len(hist) == 0 {
		s.smp.sample(r.Context())
		hist = s.smp.snapshot()
	}
	var d overviewData
	if len(hist) > 0 {
		d.S = hist[len(hist)-1]
	}
	d.Plots, d.Queue, d.Root = renderPlots(hist, queue), queue, rootOf(r)
	s.page(w, "overview.html", d)
}

type jobsData struct {
	Root                  string
	Queue, Target, States string
	After                 int64
	Jobs                  []protocol.JobInfo
	Next                  string // query of the next page, "" at the end
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	d := jobsData{Root: rootOf(r), Queue: q.Get("queue"), Target: q.Get("target"), States: strings.ToUpper(q.Get("state"))}
	if a := q.Get("after"); a != "" {
		id, err := parseID(a)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		d.After = id
	}
	if _, err := job.ParseStates(d.States); d.States != "" && err != nil {
		http.Error(w, protocol.ClipText(err.Error(), 200), http.StatusBadRequest)
		return
	}
	st := protocol.Stat{Queue: d.Queue, Target: d.Target, States: d.States}
	var jobs []protocol.JobInfo
	var err error
	if !s.noneIn(r.Context(), st) {
		jobs, err = s.cfg.Source.JobsPage(r.Context(), st, d.After, pageSize+1)
	}
	if err != nil {
		s.fail(w, err)
		return
	}
	if len(jobs) > pageSize {
		jobs = jobs[:pageSize]
		nq := r.URL.Query()
		nq.Set("after", fmt.Sprint(jobs[len(jobs)-1].ID))
		d.Next = "jobs?" + nq.Encode()
	}
	d.Jobs = jobs
	s.page(w, "jobs.html", d)
}

// noneIn says whether the core's counts, in memory, have no job in the
// states a listing asks for (in its queue): the page is then empty
// without a read, where the listing would read every job to find none.
// The last sample saying there are some spares the summary's copy (a few
// ms at thousands of queues); only the summary can say there are none.
// (A state few jobs are in is listed by name from the core's sets of
// jobs by state, module bystate: an index on the state would cost every
// change of a job's state more than the listing gains, BENCHMARKS.md.)
func (s *Server) noneIn(ctx context.Context, st protocol.Stat) bool {
	states, err := job.ParseStates(st.States)
	if st.States == "" || st.Target != "" || err != nil {
		return false
	}
	in := func(counts map[string]int) (n int) {
		for _, js := range states {
			n += counts[js.String()]
			if js == job.Executing { // E lists the prefetched too
				n += counts[job.Prefetched.String()]
			}
		}
		return n
	}
	if last, ok := s.smp.latest(); ok {
		counts := last.Totals
		if st.Queue != "" {
			counts = nil
			if last.More != nil {
				counts = last.More.Counts // at most what a queue not shown has
			}
			for _, q := range last.Queues {
				if q.Queue == st.Queue {
					counts = q.Counts
				}
			}
		}
		if in(counts) > 0 {
			return false
		}
	}
	sum, err := s.cfg.Source.Summary(ctx)
	if err != nil {
		return false
	}
	n := 0
	for _, q := range sum {
		if st.Queue == "" || q.Queue == st.Queue {
			n += in(q.Counts)
		}
	}
	return n == 0
}

type jobData struct {
	Root string
	D    protocol.JobDetail
	// Output as the CLS has it now (its last OutputTail bytes), and why
	// there is none.
	Stdout, Stderr         string
	StdoutNote, StderrNote string
	Truncated              bool
	Follow                 bool // the page streams output while the job runs
	// Prerequisite targets left off the page (a gather job may have
	// thousands: mqstat -j lists them all).
	PrereqsMore, AfterAnyMore, WaitingMore int
}

// maxPrereqLinks and maxWaitingRows bound a job page's prerequisite
// targets: the links, and the table of their jobs (those not complete
// first).
const (
	maxPrereqLinks = 50
	maxWaitingRows = 200
)

// boundPrereqs keeps at most the first maxPrereqLinks of a job's
// prerequisite and after-any targets, and maxWaitingRows of its
// prerequisite targets' counts, those not complete first.
func (jd *jobData) boundPrereqs() {
	d := &jd.D
	if n := len(d.Prereqs); n > maxPrereqLinks {
		d.Prereqs, jd.PrereqsMore = d.Prereqs[:maxPrereqLinks], n-maxPrereqLinks
	}
	if n := len(d.AfterAny); n > maxPrereqLinks {
		d.AfterAny, jd.AfterAnyMore = d.AfterAny[:maxPrereqLinks], n-maxPrereqLinks
	}
	if n := len(d.WaitingOn); n > maxWaitingRows {
		w := slices.Clone(d.WaitingOn)
		slices.SortStableFunc(w, func(a, b protocol.TargetStatus) int {
			return cmp.Compare(btoi(a.Complete || a.Ended && a.AfterAny), btoi(b.Complete || b.Ended && b.AfterAny))
		})
		d.WaitingOn, jd.WaitingMore = w[:maxWaitingRows], n-maxWaitingRows
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *Server) job(w http.ResponseWriter, r *http.Request) {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	d, err := s.cfg.Source.Job(r.Context(), id)
	if err != nil {
		s.fail(w, err)
		return
	}
	jd := jobData{Root: rootOf(r), D: d, Follow: s.cfg.Follow != nil && handedOut(d.State)}
	jd.boundPrereqs()
	var t1, t2 bool
	jd.Stdout, jd.StdoutNote, t1 = s.output(d, d.Stdout, d.StdoutCopy, d.StdoutStream, outstream.Stdout)
	jd.Stderr, jd.StderrNote, t2 = s.output(d, d.Stderr, d.StderrCopy, d.StderrStream, outstream.Stderr)
	jd.Truncated = t1 || t2
	s.page(w, "job.html", jd)
}

// handedOut says whether a job in state runs on a placeholder: E, or P
// (prefetched: handed out ahead, about to start), whose output the page
// follows as for E.
func handedOut(state string) bool {
	return state == string(job.Executing) || state == string(job.Prefetched)
}

// output reads the end of one of a job's outputs (stream) where the
// CLS has it: its extent ext in a stream file (the placeholder's, or the
// CLS's copy of a remote one's), its own copy cp of a remote
// placeholder's output file, or the file a local placeholder writes. The
// hook for output followed live is Config.Follow.
func (s *Server) output(d protocol.JobDetail, path, cp string, ext *protocol.StreamExtent, stream outstream.Stream) (text, note string, truncated bool) {
	switch {
	case path == "":
		return "", "no output yet", false
	case ext != nil && cp == "":
		return s.streamTail(d.ID, ext, stream)
	case cp != "":
		path = cp
	case d.Site != "" && d.Site != "local":
		return "", "", false
	}
	f, st, err := outstream.OpenFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if cp != "" && handedOut(d.State) {
			return "", fmt.Sprintf("running on host %s: its output is copied here when it ends", protocol.ClipText(d.Host, 200)), false
		}
		return "", "no output", false
	}
	if err != nil {
		return "", "cannot read the output", false
	}
	defer f.Close()
	if st.Size() > s.cfg.OutputTail {
		truncated = true
		f.Seek(st.Size()-s.cfg.OutputTail, io.SeekStart)
	}
	b, _ := io.ReadAll(io.LimitReader(f, s.cfg.OutputTail))
	// Shown as text: html/template escapes it; invalid UTF-8 and control
	// characters are made visible, newlines and tabs kept.
	if truncated {
		b = fromRune(b)
	}
	return printableOutput(b), "", truncated
}

// streamTail reads the end of job id's output stream from its extent in
// a stream file, each chunk read checked (outstream.ReadTail).
func (s *Server) streamTail(id int64, ext *protocol.StreamExtent, stream outstream.Stream) (text, note string, truncated bool) {
	var b bytes.Buffer
	t := outstream.Tag{Job: id, Attempt: ext.Attempt, Stream: stream}
	truncated, err := outstream.ReadFileTail(&b, ext.Path, t, outstream.Extent{Last: ext.Last, Bytes: ext.Bytes, Cut: ext.Cut}, s.cfg.OutputTail)
	switch {
	case errors.Is(err, outstream.ErrTorn):
		return "", "cannot read the output: it is damaged", false
	case err != nil:
		return "", "cannot read the output", false
	case b.Len() == 0:
		return "", "no output", false
	}
	out := b.Bytes()
	if truncated {
		out = fromRune(out)
	}
	return printableOutput(out), "", truncated
}

// fromRune drops the end of a character a tail was cut in (at most
// UTFMax-1 bytes), which would show as escaped bytes.
func fromRune(b []byte) []byte {
	for i := 0; i < len(b) && i < utf8.UTFMax; i++ {
		if utf8.RuneStart(b[i]) {
			return b[i:]
		}
	}
	return b
}

// printableOutput keeps newlines and tabs, escapes other controls and
// invalid UTF-8 the way mq shows peer text.
func printableOutput(b []byte) string {
	lines := strings.Split(string(b), "\n")
	for i, l := range lines {
		parts := strings.Split(l, "\t")
		for k, p := range parts {
			parts[k] = protocol.Printable(p)
		}
		lines[i] = strings.Join(parts, "\t")
	}
	return strings.Join(lines, "\n")
}

type targetData struct {
	Root      string
	Name      string
	Nodes     []inspect.TargetNode
	Truncated bool
	SVG       dagSVG
}

func (s *Server) target(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if name == "" {
		name = r.URL.Query().Get("name") // "." and ".." (targetURL)
	}
	nodes, trunc, err := s.cfg.Source.TargetGraph(r.Context(), name, 200)
	if err != nil {
		s.fail(w, err)
		return
	}
	s.page(w, "target.html", targetData{Root: rootOf(r), Name: name, Nodes: nodes, Truncated: trunc, SVG: layoutDAG(nodes)})
}

// events streams the overview's updates (server-sent events) until the
// page goes away.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	queue, ok := plotQueue(w, r)
	if !ok {
		return
	}
	release, err := s.strm.acquire(clientOf(r.Context()))
	if err != nil {
		http.Error(w, err.Error(), http.StatusTooManyRequests)
		return
	}
	defer release()
	ch, err := s.smp.subscribe(queue)
	if err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer s.smp.unsubscribe(ch)
	sse(w)
	rc := http.NewResponseController(w)
	rc.Flush()
	keep := time.NewTicker(15 * time.Second)
	defer keep.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case ev := <-ch:
			if _, err := w.Write(ev); err != nil {
				return
			}
		case <-keep.C:
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
		}
		if rc.Flush() != nil {
			return
		}
	}
}

// outputEvents streams a running job's output through Config.Follow, as
// "chunk" events whose data is the escaped text, and "end" when it ends,
// with the job's state then (the page shows it without a reload).
func (s *Server) outputEvents(w http.ResponseWriter, r *http.Request) {
	id, err := parseID(r.PathValue("id"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if s.cfg.Follow == nil {
		http.Error(w, "this CLS does not stream output", http.StatusNotFound)
		return
	}
	release, err := s.strm.acquire(clientOf(r.Context()))
	if err != nil {
		http.Error(w, err.Error(), http.StatusTooManyRequests)
		return
	}
	defer release()
	ch, err := s.cfg.Follow(r.Context(), id, r.URL.Query().Get("stream") == "stderr")
	if err != nil {
		s.fail(w, err)
		return
	}
	sse(w)
	rc := http.NewResponseController(w)
	rc.Flush() // the page knows it follows before the first chunk
	// A chunk may end inside a character: its first bytes wait for the
	// next chunk, or they would show as escapes.
	var part []byte
	first := true
	chunk := func(b []byte) error {
		js, _ := json.Marshal(printableOutput(b)) // the text as a JSON string: one data line, exact
		fmt.Fprintf(w, "event: chunk\ndata: %s\n\n", js)
		return rc.Flush()
	}
	for {
		select {
		case <-r.Context().Done():
			return
		case b, ok := <-ch:
			if !ok {
				if len(part) > 0 {
					chunk(part)
				}
				var end []byte
				if d, err := s.cfg.Source.Job(r.Context(), id); err == nil && len(d.State) == 1 {
					end, _ = json.Marshal(map[string]string{"state": d.State, "name": job.State(d.State[0]).Name()})
				}
				fmt.Fprintf(w, "event: end\ndata: %s\n\n", end)
				rc.Flush()
				return
			}
			if first {
				// The stream starts from the end of what was written so
				// far, perhaps inside a character.
				b, first = fromRune(b), false
			}
			b, part = cutRune(append(part, b...))
			if len(b) > 0 && chunk(b) != nil {
				return
			}
		}
	}
}

// cutRune splits b before a character its end cuts short.
func cutRune(b []byte) (whole, rest []byte) {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i], append([]byte(nil), b[i:]...)
			}
			break
		}
	}
	return b, nil
}

func sse(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}
