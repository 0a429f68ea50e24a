package web

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	dto "github.com/prometheus/client_model/go"

	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/job"
	"github.com/mq-hpc/mq/protocol"
)

// Metrics is the CLS's Prometheus registry (never the global one) and the
// metaqueue.Observer that feeds it. Gauges of jobs, placeholders and
// transfers are read from the Source when scraped; rates come from the
// core as it works.
type Metrics struct {
	reg *prometheus.Registry

	dispatched prometheus.Counter
	ended      *prometheus.CounterVec
	endedDone  prometheus.Counter
	endedFail  prometheus.Counter
	endedQueue prometheus.Counter
	latency    prometheus.Histogram
	wait       prometheus.Histogram
	commit     *prometheus.HistogramVec
	commitFull prometheus.Observer
	commitNorm prometheus.Observer
}

var _ metaqueue.Observer = (*Metrics)(nil)

// NewMetrics makes the registry. Register the source with SetSource once
// it exists (the store needs the Observer before it opens).
func NewMetrics() *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry()}
	m.dispatched = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mq_dispatched_jobs_total", Help: "Jobs handed to placeholders."})
	m.ended = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "mq_attempts_ended_total", Help: "Job attempts ended (reported, or lease expired), by the state the job went to: done, failed, or queued again."},
		[]string{"to"})
	m.endedDone, m.endedFail, m.endedQueue = m.ended.WithLabelValues("done"), m.ended.WithLabelValues("failed"), m.ended.WithLabelValues("queued")
	m.latency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "mq_dispatch_latency_seconds", Help: "How long a placeholder's request for work waited for the job it got (its long poll included).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)})
	m.wait = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name: "mq_job_wait_seconds", Help: "How long a job waited from submission to dispatch (prerequisites included).",
		Buckets: prometheus.ExponentialBuckets(0.01, 4, 12)})
	m.commit = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "mq_commit_seconds", Help: "How long the metaqueue's group commits took, by whether they were fsync'd.",
		Buckets: prometheus.ExponentialBuckets(0.00005, 4, 10)}, []string{"durable"})
	m.commitFull, m.commitNorm = m.commit.WithLabelValues("true"), m.commit.WithLabelValues("false")
	m.reg.MustRegister(m.dispatched, m.ended, m.latency, m.wait, m.commit,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry is where the CLS's metrics are registered.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Dispatched implements metaqueue.Observer.
func (m *Metrics) Dispatched(latency, wait time.Duration) {
	m.dispatched.Inc()
	m.latency.Observe(latency.Seconds())
	m.wait.Observe(wait.Seconds())
}

// Ended implements metaqueue.Observer.
func (m *Metrics) Ended(to job.State) {
	switch to {
	case job.Done:
		m.endedDone.Inc()
	case job.Failed:
		m.endedFail.Inc()
	default:
		m.endedQueue.Inc()
	}
}

// Committed implements metaqueue.Observer.
func (m *Metrics) Committed(d time.Duration, durable bool) {
	if durable {
		m.commitFull.Observe(d.Seconds())
	} else {
		m.commitNorm.Observe(d.Seconds())
	}
}

// SetSource registers the gauges read from src at each scrape.
func (m *Metrics) SetSource(src Source) {
	m.reg.MustRegister(&sourceCollector{src: src})
}

// totals are the counters the sampler turns into rates.
type totals struct {
	dispatched, done, failed float64
	waitSum                  float64
	waitN                    uint64
}

// totals reads the counters (a nil m reads zeros).
func (m *Metrics) totals() totals {
	var t totals
	if m == nil {
		return t
	}
	var pb dto.Metric
	val := func(c prometheus.Metric) float64 {
		pb.Reset()
		if c.Write(&pb) != nil {
			return 0
		}
		return pb.GetCounter().GetValue()
	}
	t.dispatched, t.done, t.failed = val(m.dispatched), val(m.endedDone), val(m.endedFail)
	pb.Reset()
	if m.wait.Write(&pb) == nil {
		t.waitSum, t.waitN = pb.GetHistogram().GetSampleSum(), pb.GetHistogram().GetSampleCount()
	}
	return t
}

var (
	jobsDesc = prometheus.NewDesc("mq_jobs", fmt.Sprintf("Jobs per queue and state (W Q H P E D F B X): at most %d queues, those with jobs not ended first, the others summed as queue=%q.", maxQueueRows, otherQueues),
		[]string{"queue", "state"}, nil)
	queuesDesc = prometheus.NewDesc("mq_queues", fmt.Sprintf("Queues the CLS has (those beyond mq_jobs' %d are summed in its queue=%q).", maxQueueRows, otherQueues), nil, nil)
	phDesc     = prometheus.NewDesc("mq_placeholders", "Placeholders per site and state: queued (in the batch queue), running, idle (connected, no job), busy.",
		[]string{"site", "state"}, nil)
	slotsDesc     = prometheus.NewDesc("mq_site_slots", "Job slots of a site's connected placeholders.", []string{"site"}, nil)
	slotsBusyDesc = prometheus.NewDesc("mq_site_slots_busy", "Job slots of a site running a job now.", []string{"site"}, nil)
	siteDesc      = prometheus.NewDesc("mq_site_up", "1 for the state a site is in (starting, ok, throttled, degraded).", []string{"site", "state"}, nil)
	unreachDesc   = prometheus.NewDesc("mq_site_unreachable", "1 when a remote site's last listing failed: a network cut may part it from the CLS.", []string{"site"}, nil)
	heldDesc      = prometheus.NewDesc("mq_site_held_leases", "Attempts of a site's silent placeholders whose lapsed leases the CLS holds while the site may be cut off (their jobs stay Running).", []string{"site"}, nil)
	xferDesc      = prometheus.NewDesc("mq_transfers_total", "Data staging transfers made.", nil, nil)
	xferFailDesc  = prometheus.NewDesc("mq_transfers_failed_total", "Data staging transfers that failed.", nil, nil)
	xferBytesDesc = prometheus.NewDesc("mq_transfer_bytes_total", "Bytes moved by data staging.", nil, nil)
	xferSecsDesc  = prometheus.NewDesc("mq_transfer_seconds_total", "Time spent moving data.", nil, nil)
	scrapeErrDesc = prometheus.NewDesc("mq_scrape_errors", "1 when a part of this scrape could not be read from the CLS.", []string{"part"}, nil)
)

// otherQueues is mq_jobs' queue label of the queues beyond those shown,
// summed: a queue name has no space, so no queue is called so.
const otherQueues = "other queues"

// sourceCollector reads gauges from the Source at scrape time: the summary
// and sites are in memory, so a scrape costs the same at a million jobs.
type sourceCollector struct{ src Source }

func (c *sourceCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{jobsDesc, queuesDesc, phDesc, slotsDesc, slotsBusyDesc, siteDesc, unreachDesc, heldDesc, xferDesc, xferFailDesc, xferBytesDesc, xferSecsDesc, scrapeErrDesc} {
		ch <- d
	}
}

func (c *sourceCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fail := func(part string, err error) {
		v := 0.0
		if err != nil {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(scrapeErrDesc, prometheus.GaugeValue, v, part)
	}
	qs, err := c.src.Summary(ctx)
	fail("jobs", err)
	// The queues the overview shows, and the others summed: a queue per
	// experiment would otherwise make a scrape, and the series Prometheus
	// keeps, grow without bound (9 a queue).
	shown, more := shownQueues(qs)
	for _, q := range shown {
		for _, st := range job.States {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(q.Counts[st.String()]), q.Queue, st.String())
		}
	}
	if more != nil {
		for _, st := range job.States {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(more.Counts[st.String()]), otherQueues, st.String())
		}
	}
	if err == nil {
		ch <- prometheus.MustNewConstMetric(queuesDesc, prometheus.GaugeValue, float64(len(qs)))
	}
	sites, err := c.src.Sites(ctx)
	fail("sites", err)
	for _, s := range sites {
		for _, p := range []struct {
			state string
			n     int
		}{{"queued", s.Queued}, {"running", s.Running}, {"idle", s.Idle}, {"busy", s.Busy}} {
			ch <- prometheus.MustNewConstMetric(phDesc, prometheus.GaugeValue, float64(p.n), s.Name, p.state)
		}
		ch <- prometheus.MustNewConstMetric(slotsDesc, prometheus.GaugeValue, float64(s.Slots), s.Name)
		ch <- prometheus.MustNewConstMetric(slotsBusyDesc, prometheus.GaugeValue, float64(s.SlotsBusy), s.Name)
		for _, st := range []string{"starting", "ok", "throttled", "degraded"} {
			v := 0.0
			if s.State == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(siteDesc, prometheus.GaugeValue, v, s.Name, st)
		}
		unreachable := 0.0
		if s.Unreachable {
			unreachable = 1
		}
		ch <- prometheus.MustNewConstMetric(unreachDesc, prometheus.GaugeValue, unreachable, s.Name)
		ch <- prometheus.MustNewConstMetric(heldDesc, prometheus.GaugeValue, float64(s.HeldLeases), s.Name)
	}
	moved, err := c.src.Moved(ctx)
	fail("transfers", err)
	if moved == nil {
		moved = new(protocol.MovedTotals)
	}
	ch <- prometheus.MustNewConstMetric(xferDesc, prometheus.CounterValue, float64(moved.Transfers))
	ch <- prometheus.MustNewConstMetric(xferFailDesc, prometheus.CounterValue, float64(moved.Failed))
	ch <- prometheus.MustNewConstMetric(xferBytesDesc, prometheus.CounterValue, float64(moved.Bytes))
	ch <- prometheus.MustNewConstMetric(xferSecsDesc, prometheus.CounterValue, moved.Seconds)
}
