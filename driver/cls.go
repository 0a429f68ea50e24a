package driver

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/internal/backoff"
	"github.com/mq-hpc/mq/protocol"
)

// maxSubmit is the most loose jobs one submit request carries.
const maxSubmit = 512

// waitTimeout bounds one wait request; the watcher simply asks again.
const waitTimeout = time.Minute

// clsBackend submits jobs to a CLS over one pipelined connection and
// watches them with long-poll waits.
//
// Submission is safe to retry: every submit request carries a token unique
// to this driver (random) and the request (a counter), and the metaqueue
// commits the token with the jobs. A request whose reply was lost (the
// connection or the CLS died) is sent again with the same token after
// reconnecting: if the first had committed, the CLS returns its ids instead
// of adding the jobs twice.
type clsBackend struct {
	d      *Driver
	dial   func(ctx context.Context) (io.ReadWriteCloser, error)
	prefix string
	seq    atomic.Uint64

	mu sync.Mutex
	cl *client.Client

	watchers sync.WaitGroup
	// warned keeps the CLS's submit warnings to one log line per run:
	// every request of a workflow would repeat them.
	warned sync.Once
}

func newCLS(ctx context.Context, d *Driver) (*clsBackend, error) {
	dial := d.cfg.Dial
	if dial == nil {
		dial = func(ctx context.Context) (io.ReadWriteCloser, error) {
			return client.DialSocket(ctx, d.cfg.Home)
		}
	}
	var b [8]byte
	if _, err := cryptoRead(b[:]); err != nil {
		return nil, fmt.Errorf("driver: token: %w", err)
	}
	be := &clsBackend{d: d, dial: dial, prefix: "drv-" + hex.EncodeToString(b[:])}
	// The first connection is made now so that a wrong Home is an error
	// from Start, not a hang later.
	cl, err := be.connect(ctx)
	if err != nil {
		return nil, fmt.Errorf("driver: cannot reach the CLS: %w", err)
	}
	be.cl = cl
	return be, nil
}

var cryptoRead = crand.Read

func (b *clsBackend) connect(ctx context.Context) (*client.Client, error) {
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	rwc, err := b.dial(dctx)
	if err != nil {
		return nil, err
	}
	cl, err := client.New(dctx, rwc, protocol.RoleUser, "mq-driver")
	if err != nil {
		rwc.Close()
		return nil, err
	}
	return cl, nil
}

// conn returns the connection, reconnecting with backoff (up to
// Config.Reconnect) when it is gone.
func (b *clsBackend) conn(ctx context.Context) (*client.Client, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cl != nil {
		select {
		case <-b.cl.Done():
			b.cl.Close()
			b.cl = nil
		default:
			return b.cl, nil
		}
	}
	deadline := time.Now().Add(b.d.cfg.Reconnect)
	retry := backoff.Backoff{Min: 20 * time.Millisecond, Max: time.Second, Jitter: 0.5}
	for {
		cl, err := b.connect(ctx)
		if err == nil {
			b.cl = cl
			b.d.cfg.Log.Info("driver connected to the CLS")
			return cl, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		var pe *protocol.Error
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("the CLS refused the driver: %w", err)
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("the CLS has been unreachable for %s: %w", b.d.cfg.Reconnect, err)
		}
		d := retry.Next()
		b.d.cfg.Log.Warn("cannot reach the CLS; retrying", "err", err, "in", d)
		// Others wait on b.mu meanwhile: they would only dial too.
		if err := backoff.Sleep(ctx, d); err != nil {
			return nil, err
		}
	}
}

// dropped marks a connection broken.
func (b *clsBackend) dropped(cl *client.Client) {
	b.mu.Lock()
	if b.cl == cl {
		b.cl = nil
	}
	b.mu.Unlock()
	cl.Close()
}

func (b *clsBackend) close() {
	b.watchers.Wait()
	b.mu.Lock()
	if b.cl != nil {
		b.cl.Close()
		b.cl = nil
	}
	b.mu.Unlock()
}

// request is one submit request and the buffer entries it carries.
type request struct {
	body protocol.Submit
	ents []*entry
	// sent: the request went out at least once, so its jobs may be in
	// the metaqueue though no reply said so.
	sent bool
}

// consume takes units from the buffer, submits them in pipelined requests
// (a bundle per request; loose jobs together, up to maxSubmit), and starts a
// watcher per request.
func (b *clsBackend) consume(ctx context.Context) {
	for u := range b.d.ready {
		reqs := []*request{}
		var loose *request
		add := func(u *unit) {
			if u = b.dropCancelled(u); u == nil {
				return
			}
			if u.bundle {
				reqs = append(reqs, b.newRequest(u.jobs, true))
				return
			}
			if loose == nil || len(loose.ents) >= maxSubmit {
				loose = b.newRequest(nil, false)
				reqs = append(reqs, loose)
			}
			loose.ents = append(loose.ents, u.jobs...)
			loose.body.Jobs = append(loose.body.Jobs, wireSpec(u.jobs[0]))
		}
		add(u)
	drain: // whatever else is buffered goes out in the same round trip
		for n := len(u.jobs); n < 4*maxSubmit; {
			select {
			case u2, ok := <-b.d.ready:
				if !ok {
					break drain
				}
				add(u2)
				n += len(u2.jobs)
			default:
				break drain
			}
		}
		b.submit(ctx, reqs)
	}
}

// dropCancelled ends the jobs of u cancelled before they were submitted,
// and returns what is left of u (nil if nothing).
func (b *clsBackend) dropCancelled(u *unit) *unit {
	if !slices.ContainsFunc(u.jobs, func(e *entry) bool { return e.rec.cancelled() }) {
		return u
	}
	var keep []*entry
	for _, e := range u.jobs {
		if e.rec.cancelled() {
			b.d.finish(e.rec, Result{State: "X", Err: &JobError{Key: e.rec.key, State: "X", Reason: "cancelled before it was submitted"}})
			continue
		}
		keep = append(keep, e)
	}
	if len(keep) == 0 {
		return nil
	}
	return &unit{jobs: keep, bundle: u.bundle && len(keep) > 1}
}

// kill deletes a cancelled job at the CLS once it has an id; before that
// the consumer drops it, or submit deletes it when its id comes back.
func (b *clsBackend) kill(r *record) {
	b.d.mu.Lock()
	id := r.id
	b.d.mu.Unlock()
	if id != 0 {
		b.delete([]int64{id})
	}
}

// delete asks the CLS to delete jobs, in the background: the watchers see
// them end (state X), and the CLS kills a running one through its
// placeholder's next heartbeat.
func (b *clsBackend) delete(ids []int64) {
	ctx := b.d.ctx
	go func() {
		cl, err := b.conn(ctx)
		if err == nil {
			_, err = client.Do(ctx, cl, protocol.OpDelete, protocol.Select{IDs: ids})
		}
		if err != nil && ctx.Err() == nil {
			b.d.cfg.Log.Warn("could not delete cancelled jobs", "ids", ids, "err", err)
		}
	}()
}

func (b *clsBackend) newRequest(ents []*entry, bundle bool) *request {
	r := &request{ents: ents, body: protocol.Submit{Bundle: bundle, Token: fmt.Sprintf("%s-%d", b.prefix, b.seq.Add(1))}}
	for _, e := range ents {
		r.body.Jobs = append(r.body.Jobs, wireSpec(e))
	}
	return r
}

// wireSpec is an entry's spec as it travels: a command that is not UTF-8
// goes as bytes (protocol.EncodeCommand).
func wireSpec(e *entry) protocol.JobSpec {
	js := e.spec
	protocol.EncodeCommand(&js)
	return js
}

// submit sends requests pipelined, and resends those whose reply was lost
// (same token: safe) until they are answered.
func (b *clsBackend) submit(ctx context.Context, reqs []*request) {
	for len(reqs) > 0 {
		cl, err := b.conn(ctx)
		if err != nil {
			for _, r := range reqs {
				b.fail(r.ents, r.unanswered("cannot submit", err))
			}
			return
		}
		calls := make([]*client.Call[protocol.SubmitReply], len(reqs))
		for i, r := range reqs {
			calls[i], err = client.Go(cl, protocol.OpSubmit, r.body)
			if err != nil {
				break
			}
			r.sent = true
		}
		var retry []*request
		broken := false
		for i, r := range reqs {
			if calls[i] == nil {
				retry = append(retry, r)
				continue
			}
			reply, err := calls[i].Wait(ctx)
			var pe *protocol.Error
			switch {
			case err == nil && len(reply.IDs) == len(r.ents):
				if len(reply.Warnings) > 0 {
					b.warned.Do(func() {
						b.d.cfg.Log.Warn("driver: the CLS warns about submitted jobs (logged once a run)", "warning", reply.Warnings[0])
					})
				}
				var cancelled []int64
				b.d.mu.Lock()
				for i, e := range r.ents {
					e.rec.id = reply.IDs[i]
					if e.rec.cause != nil {
						cancelled = append(cancelled, e.rec.id)
					}
				}
				b.d.mu.Unlock()
				if len(cancelled) > 0 {
					b.delete(cancelled)
				}
				b.watchers.Add(1)
				go b.watch(ctx, reply.IDs, r.ents)
			case err == nil:
				b.fail(r.ents, fmt.Errorf("the CLS returned %d ids for %d jobs", len(reply.IDs), len(r.ents)))
			case errors.As(err, &pe) && pe.Code != protocol.CodeShutdown:
				b.fail(r.ents, err) // refused (a cycle, say): resending would not help
			case ctx.Err() != nil:
				b.fail(r.ents, r.unanswered("not submitted", ctx.Err()))
			default:
				broken = true
				retry = append(retry, r)
			}
		}
		if broken {
			b.d.cfg.Log.Warn("lost the CLS connection while submitting; resending", "requests", len(retry))
			b.dropped(cl)
		}
		reqs = retry
	}
}

// unanswered is why r's jobs have no id when the submission gives up on
// err: not submitted (what) if r never went out; else the CLS may have
// taken them before its reply was lost, and they may run yet.
func (r *request) unanswered(what string, err error) error {
	if !r.sent {
		return fmt.Errorf("%s: %w", what, err)
	}
	return fmt.Errorf("lost track of it: its submission was sent and not answered, so it may be in the metaqueue and run yet (mqstat; the driver cannot delete it): %w", err)
}

func (b *clsBackend) fail(ents []*entry, err error) {
	for _, e := range ents {
		b.d.finish(e.rec, Result{Err: &JobError{Key: e.rec.key, Reason: err.Error()}})
	}
}

// watch waits for submitted jobs to end, one long-poll wait for all of them
// at a time (returning when any ends), re-issued for the rest. A lost
// connection is re-established and the wait re-issued: the jobs are durable
// in the CLS, so a restarted CLS still knows them.
func (b *clsBackend) watch(ctx context.Context, ids []int64, ents []*entry) {
	defer b.watchers.Done()
	byID := make(map[int64]*entry, len(ids))
	for i, id := range ids {
		byID[id] = ents[i]
	}
	pending := ids
	for len(pending) > 0 {
		cl, err := b.conn(ctx)
		if err != nil {
			// The job is durable in the CLS, which the driver cannot
			// ask to delete it: say it may run yet.
			b.failIDs(byID, pending, fmt.Errorf("lost track of it; it stays in the metaqueue and may run yet (mqstat -j, mqdel): %w", err))
			return
		}
		reply, err := client.Do(ctx, cl, protocol.OpWait, protocol.Wait{IDs: pending, Any: true, TimeoutMS: int(waitTimeout / time.Millisecond)})
		var pe *protocol.Error
		switch {
		case err == nil:
		case errors.As(err, &pe) && pe.Code != protocol.CodeShutdown:
			b.failIDs(byID, pending, err) // e.g. not_found: the CLS has another database
			return
		case ctx.Err() != nil:
			return // Stop gave up; it reports what is still open
		default:
			b.dropped(cl)
			continue
		}
		// A CLS of this version says where and when each job ran in the
		// reply; ask separately only for those it did not (a job that
		// never started, or an older CLS).
		var unplaced []protocol.JobEnd
		for _, je := range reply.Jobs {
			if je.Started == "" {
				unplaced = append(unplaced, je)
			}
		}
		info := b.details(ctx, cl, unplaced)
		for _, je := range reply.Jobs {
			e := byID[je.ID]
			if e == nil {
				continue
			}
			delete(byID, je.ID)
			res := resultOf(e.rec.key, je)
			res.out = b
			if ji, ok := info[je.ID]; ok {
				b.fill(&res, ji)
			} else if je.Started != "" {
				ji := protocol.JobInfo{Attempts: je.Attempt, Site: je.Site, Host: je.Host, Started: je.Started, Finished: je.Finished}
				if je.Usage != nil {
					ji.Accounting.Usage = *je.Usage
				}
				b.fill(&res, ji)
			}
			b.d.finish(e.rec, res)
		}
		pending = pending[:0:0]
		for _, id := range reply.Pending {
			if byID[id] != nil {
				pending = append(pending, id)
			}
		}
		if len(reply.Jobs) == 0 && len(reply.Pending) == 0 {
			b.failIDs(byID, ids, errors.New("the CLS's wait reply named none of the jobs"))
			return
		}
	}
}

func (b *clsBackend) failIDs(byID map[int64]*entry, ids []int64, err error) {
	for _, id := range ids {
		if e := byID[id]; e != nil {
			delete(byID, id)
			b.d.finish(e.rec, Result{ID: id, Err: &JobError{Key: e.rec.key, ID: id, Reason: err.Error()}})
		}
	}
}

// details fetches where and when ended jobs ran (one stat request for a
// wait reply's jobs). Without it results lack those fields, nothing else:
// a failure is logged, not fatal.
func (b *clsBackend) details(ctx context.Context, cl *client.Client, ends []protocol.JobEnd) map[int64]protocol.JobInfo {
	if len(ends) == 0 {
		return nil
	}
	ids := make([]int64, len(ends))
	for i, je := range ends {
		ids[i] = je.ID
	}
	out := make(map[int64]protocol.JobInfo, len(ids))
	// Every state: the CLS then looks the ids up by key, with no state
	// filter that could pick the state index over millions of done jobs.
	err := client.Stream(ctx, cl, protocol.OpStat, protocol.Stat{IDs: ids, States: "WQHEDFBX"}, func(r protocol.StatReply) error {
		for _, j := range r.Jobs {
			out[j.ID] = j
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		b.d.cfg.Log.Warn("could not fetch ended jobs' details", "err", err)
	}
	return out
}

// fill adds a job's attempt, place and times to its result.
func (b *clsBackend) fill(res *Result, ji protocol.JobInfo) {
	res.Attempt, res.Site, res.Host = ji.Attempts, ji.Site, ji.Host
	res.Started, _ = time.Parse(time.RFC3339Nano, ji.Started)
	res.Finished, _ = time.Parse(time.RFC3339Nano, ji.Finished)
	if u := ji.Accounting.Usage; u.Measured() {
		res.Usage = Usage{CPU: time.Duration((u.CPUUser + u.CPUSys) * float64(time.Second)), MaxRSS: u.MaxRSS}
	}
}

// open reads a job's output from the CLS (op output.read), a piece at a
// time; the first piece is read now, so that an error is Open's.
func (b *clsBackend) open(ctx context.Context, r *Result, s Stream) (io.ReadCloser, error) {
	or := &outputReader{ctx: ctx, b: b, req: protocol.OutputRead{ID: r.ID, Attempt: r.Attempt, Stream: s.String()}, name: r.name()}
	if err := or.fetch(); err != nil {
		return nil, err
	}
	return or, nil
}

// outputReader reads a stream with output.read requests.
type outputReader struct {
	ctx  context.Context
	b    *clsBackend
	req  protocol.OutputRead
	name string
	buf  []byte
	eof  bool
	lost string
}

func (o *outputReader) fetch() error {
	cl, err := o.b.conn(o.ctx)
	if err != nil {
		return fmt.Errorf("driver: %s's %s: %w", o.name, o.req.Stream, err)
	}
	d, err := client.Do(o.ctx, cl, protocol.OpOutputRead, o.req)
	if protocol.IsCode(err, protocol.CodeTooLarge) {
		return fmt.Errorf("driver: %w: %w", ErrOutputTooLarge, err)
	}
	if err != nil {
		return fmt.Errorf("driver: %s's %s: %w", o.name, o.req.Stream, err)
	}
	o.buf, o.eof, o.lost = d.Data, d.EOF, d.Lost
	o.req.Attempt = d.Attempt // the rest from the same attempt
	o.req.Offset += int64(len(d.Data))
	if !o.eof && len(d.Data) == 0 {
		return fmt.Errorf("driver: %s's %s: the CLS sent nothing before the end", o.name, o.req.Stream)
	}
	return nil
}

func (o *outputReader) Read(p []byte) (int, error) {
	for len(o.buf) == 0 {
		if o.eof {
			if o.lost != "" {
				return 0, fmt.Errorf("driver: %s's %s: %w: %s", o.name, o.req.Stream, ErrOutputLost, o.lost)
			}
			return 0, io.EOF
		}
		if err := o.fetch(); err != nil {
			return 0, err
		}
	}
	n := copy(p, o.buf)
	o.buf = o.buf[n:]
	return n, nil
}

func (o *outputReader) Close() error { o.eof, o.buf, o.lost = true, nil, ""; return nil }

// resultOf turns the metaqueue's account of a job's end into a Result.
func resultOf(k Key, je protocol.JobEnd) Result {
	res := Result{Key: k, ID: je.ID, State: je.State, Reason: je.Reason, Exit: -1}
	if je.Exit != nil && (je.State == "D" || je.State == "F") {
		res.Exit = *je.Exit
		return res
	}
	res.Err = &JobError{Key: k, ID: je.ID, State: je.State, Reason: je.Reason}
	return res
}
