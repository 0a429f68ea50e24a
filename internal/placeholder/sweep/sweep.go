// Package sweep kills what job attempts that ended left running outside
// their process group, found by the attempt id (protocol.EnvAttemptID)
// their processes inherited, as a batch system kills all of a job's
// processes at its end.
package sweep

import (
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/mq-hpc/mq/internal/jobexec"
	"github.com/mq-hpc/mq/protocol"
)

// every is the least time between two sweeps of /proc for what ended
// attempts left running: a scan reads every process's environment, too
// much to do at each of thousands of job ends a second, and once a second
// covers all the attempts that ended meanwhile.
const every = time.Second

// A Sweeper kills what attempts that ended on their own left running
// outside their process group, as a batch system kills all of a job's
// processes at its end: off the report's path, one scan of /proc for
// every attempt that ended since the last. A goroutine runs while there
// is something to sweep: the first end after a quiet spell is swept at
// once, the ends that follow at most every sweepEvery. An attempt id is
// unique on its host, so sweeping it late kills nothing but its own;
// one that starts again all the same (a test's, a job handed out twice)
// is not swept while it runs.
type Sweeper struct {
	every time.Duration
	log   *slog.Logger
	// kill kills the processes whose protocol.EnvAttemptID match accepts
	// (tests count the scans with it).
	kill func(match func(id string) bool) int

	mu      sync.Mutex
	ended   map[string]int64 // attempt id -> job id, not swept yet
	live    map[string]int   // attempt ids starting or running: never swept
	running bool             // a sweep goroutine runs

	scanMu sync.Mutex // held for a scan: flush waits for one under way
}

// New returns a Sweeper that logs what it kills to log.
func New(log *slog.Logger) *Sweeper {
	return &Sweeper{every: every, log: log, kill: func(match func(string) bool) int {
		return jobexec.KillTagged("/proc", protocol.EnvAttemptID, match)
	}}
}

// Start notes that attempt id is about to start: until it ends (Add)
// or did not start (Forget), no sweep touches its processes.
func (s *Sweeper) Start(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.live == nil {
		s.live = map[string]int{}
	}
	s.live[id]++
}

// Forget notes that attempt id did not start after all.
func (s *Sweeper) Forget(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unlive(id)
}

func (s *Sweeper) unlive(id string) {
	if s.live[id] <= 1 {
		delete(s.live, id) // a no-op on a nil map
		return
	}
	s.live[id]--
}

func (s *Sweeper) isLive(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.live[id] > 0
}

// Add notes that attempt id of job ended, for the next sweep.
func (s *Sweeper) Add(id string, job int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unlive(id)
	if s.ended == nil {
		s.ended = map[string]int64{}
	}
	s.ended[id] = job
	if !s.running {
		s.running = true
		go s.loop()
	}
}

// loop sweeps what has ended, waits, and again, until a wait leaves
// nothing to sweep.
func (s *Sweeper) loop() {
	for {
		if !s.sweep(true) {
			return
		}
		time.Sleep(s.every)
	}
}

// take returns what is to be swept and forgets it; with last, it marks
// the goroutine ended when there is nothing.
func (s *Sweeper) take(last bool) map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ids := s.ended
	s.ended = nil
	if len(ids) == 0 && last {
		s.running = false
	}
	return ids
}

// sweep scans once for what the attempts ended since the last sweep left
// running, and says whether there were any (fromLoop: the goroutine's
// own, which ends when there were none).
func (s *Sweeper) sweep(fromLoop bool) bool {
	s.scanMu.Lock()
	defer s.scanMu.Unlock()
	ids := s.take(fromLoop)
	if len(ids) == 0 {
		return false
	}
	var jobs []int64
	n := s.kill(func(id string) bool {
		job, ok := ids[id]
		if ok && s.isLive(id) {
			return false
		}
		if ok && len(jobs) < 10 && !slices.Contains(jobs, job) {
			jobs = append(jobs, job)
		}
		return ok
	})
	if n > 0 {
		s.log.Warn("killed the processes jobs left running past their end", "killed", n, "jobs", jobs)
	}
	return true
}

// Flush sweeps what is left at once, waiting for a sweep under way: the
// agent is stopping, and its goroutines with it. It waits wait at most,
// and says whether the sweep ended: reading the environment of a process
// in uninterruptible sleep (a hung filesystem) can block on its memory
// map's lock, and the agent must stop all the same.
func (s *Sweeper) Flush(wait time.Duration) bool {
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.sweep(false)
	}()
	tm := time.NewTimer(wait)
	defer tm.Stop()
	select {
	case <-done:
		return true
	case <-tm.C:
		return false
	}
}
