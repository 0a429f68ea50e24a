package driver

import (
	"context"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// specRecorder is a backend that keeps the specs consumers would submit
// and ends each job at once with exit 0.
type specRecorder struct {
	d     *Driver
	mu    sync.Mutex
	specs map[Key]protocol.JobSpec
}

func (r *specRecorder) consume(ctx context.Context) {
	for u := range r.d.ready {
		r.mu.Lock()
		for _, e := range u.jobs {
			r.specs[e.rec.key] = e.spec
		}
		r.mu.Unlock()
		for _, e := range u.jobs {
			r.d.finish(e.rec, Result{State: "D"})
		}
	}
}

func (r *specRecorder) close()       {}
func (r *specRecorder) kill(*record) {}

// TestCmdResources: a Cmd's Resources field, and the Resources option of
// Exec, reach the job as submitted; a bad request fails Start, as a bad
// command does, before anything is issued.
func TestCmdResources(t *testing.T) {
	t.Parallel()
	d, err := New(Config{Dir: "/tmp"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &specRecorder{d: d, specs: map[Key]protocol.JobSpec{}}
	d.be = rec
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Stop(context.Background()) })

	want := protocol.Resources{CPUs: 4, Mem: 8 << 30, GPUs: 1, Named: map[string]int{"licence": 1}}
	cmd := d.Command("blastp", "-num_threads", "4")
	cmd.Resources = want
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	plain := d.Command("true")
	if err := plain.Run(); err != nil {
		t.Fatal(err)
	}
	key, err := d.Exec(context.Background(), "true", Resources(protocol.Resources{MemAuto: true}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.WaitForOne(context.Background(), key); err != nil {
		t.Fatal(err)
	}
	rec.mu.Lock()
	got := []protocol.Resources{rec.specs[cmd.Key].Resources, rec.specs[plain.Key].Resources, rec.specs[key].Resources}
	rec.mu.Unlock()
	if !reflect.DeepEqual(got, []protocol.Resources{want, {}, {MemAuto: true}}) {
		t.Errorf("submitted %+v", got)
	}

	for _, r := range []protocol.Resources{{CPUs: -1}, {GPUs: 1000}, {Named: map[string]int{"a-b": 1}}, {Mem: 1, MemAuto: true}} {
		bad := d.Command("true")
		bad.Resources = r
		if err := bad.Start(); err == nil || strings.Contains(err.Error(), "\n") {
			t.Errorf("Start with %+v: %v, want a one-line error", r, err)
		}
	}
}

// lockedBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestCLSResourcesWarned: the CLS's warning about submitted jobs (here,
// that no placeholder or site can ever hold a request) reaches
// Config.Log, once a run; jobs that fit run all the same.
func TestCLSResourcesWarned(t *testing.T) {
	t.Parallel()
	c := newTestCLS(t, 1, 2)
	var log lockedBuffer
	d := startCLSDriver(t, c, Config{Dir: t.TempDir(), Log: slog.New(slog.NewTextHandler(&log, nil))})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for range 3 {
		cmd := d.CommandContext(ctx, "true")
		cmd.Resources = protocol.Resources{CPUs: 2}
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
	}
	bctx, bcancel := context.WithCancel(ctx)
	var bigs []*Cmd
	for range 2 {
		big := d.CommandContext(bctx, "true")
		big.Resources = protocol.Resources{CPUs: 64}
		if err := big.Start(); err != nil {
			t.Fatal(err)
		}
		bigs = append(bigs, big)
	}
	// Submitted after the big ones: once it ran, they were submitted.
	if err := d.CommandContext(ctx, "true").Run(); err != nil {
		t.Fatal(err)
	}
	bcancel() // they would wait for a placeholder of 64 cores
	for _, big := range bigs {
		big.Wait()
	}
	if got := strings.Count(log.String(), "needs 64 cores; the largest placeholder or site holds 2"); got != 1 {
		t.Errorf("%d warnings logged:\n%s", got, log.String())
	}
}
