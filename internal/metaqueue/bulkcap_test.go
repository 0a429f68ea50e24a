package metaqueue

import (
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestBulkSpoolCap: a bulk submission past Options.MaxBulkJobs or
// MaxBulkBytes is refused (too_large) instead of growing the spool file
// without bound.
func TestBulkSpoolCap(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name  string
		opt   func(*Options)
		chunk int // jobs per Add
		jobs  int // most jobs spooled
		bytes int64
	}{
		{"jobs", func(o *Options) { o.MaxBulkJobs = 10 }, 4, 10, 1 << 20},
		{"bytes", func(o *Options) { o.MaxBulkBytes = 1000 }, 4, 100, 1000 + 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnvWith(t, c.opt)
			b, err := e.s.NewBulk()
			if err != nil {
				t.Fatal(err)
			}
			defer b.Abort()
			var last error
			for i := 0; i < 100 && last == nil; i++ {
				specs := make([]protocol.JobSpec, c.chunk)
				for k := range specs {
					specs[k] = spec("t", "echo member")
				}
				last = b.Add(1+i*c.chunk, specs)
			}
			if !protocol.IsCode(last, protocol.CodeTooLarge) {
				t.Fatalf("Add past the cap: %v, want a too_large error", last)
			}
			if b.Len() > c.jobs || b.Spool.Size() > c.bytes {
				t.Errorf("spooled %d jobs, %d bytes past the cap", b.Len(), b.Spool.Size())
			}
			t.Log(last)
		})
	}
}
