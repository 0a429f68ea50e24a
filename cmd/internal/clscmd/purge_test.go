package clscmd

import (
	"bytes"
	"context"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/protocol"
)

// TestClsPurge: cls purge's flags reach the metaqueue (a dry run changes
// nothing, a purge removes the ended jobs older than the cutoff), and bad
// command lines are one-line usage errors, exit 2, with nothing removed.
func TestClsPurge(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	st, err := metaqueue.Open(context.Background(), metaqueue.Options{Path: filepath.Join(t.TempDir(), "mq.db"), Sync: metaqueue.SyncNormal, Lease: 30 * time.Second, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &server.Server{Store: st}
	run := adminRun(ctx, srv)
	ids, err := st.Submit(ctx, []protocol.JobSpec{{Target: "a", Command: "a"}, {Target: "b", Command: "b"}, {Target: "c", Command: "c"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Delete(ctx, protocol.Select{IDs: ids[:2]}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	now = now.Add(8 * 24 * time.Hour)
	mu.Unlock()
	count := func() int {
		t.Helper()
		n := 0
		err := st.Inspect().Stat(ctx, protocol.Stat{States: "WQHEDFBX"}, 0, func(js []protocol.JobInfo) error { n += len(js); return nil })
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	for _, tc := range []struct {
		args []string
		want string // in stderr
	}{
		{[]string{"purge"}, "--ended-before is required"},
		{[]string{"purge", "--ended-before", "-5"}, `--ended-before: "-5" is not an age`},
		{[]string{"purge", "--ended-before", "7x"}, `"7x" is not an age`},
		{[]string{"purge", "--ended-before", "7d", "-s", "Q"}, "-s Q: only jobs in states DFX"},
		{[]string{"purge", "--ended-before", "7d", "-s", "DQ"}, "-s DQ: only ended jobs (states DFX) can be purged"},
		{[]string{"purge", "--ended-before", "7d", "--batch", "0"}, "--batch 0: give 1..50000 jobs"},
		{[]string{"purge", "--ended-before", "7d", "x1"}, "x1"},
	} {
		out, errOut, code := run(tc.args...)
		if code != 2 || out != "" || strings.Count(errOut, "\n") != 1 || !strings.Contains(errOut, tc.want) {
			t.Errorf("cls %v: exit %d, stdout %q, stderr %q; want exit 2 and one line with %q", tc.args, code, out, errOut, tc.want)
		}
	}
	if n := count(); n != 3 {
		t.Fatalf("%d jobs after refused purges, want 3", n)
	}

	out, errOut, code := run("purge", "--ended-before", "7d", "--dry-run")
	if code != 0 || !strings.Contains(out, "would purge 2 jobs") || count() != 3 {
		t.Fatalf("dry run: exit %d, %q %q, %d jobs left", code, out, errOut, count())
	}
	out, errOut, code = run("purge", "--batch", "1", "--ended-before", "7d", "1-3", "--dry-run", "-s", "X")
	if code != 0 || !strings.Contains(out, "would purge 2 jobs (0 B of output) in 2 batches") || count() != 3 {
		t.Fatalf("flags after a range: exit %d, %q %q, %d jobs left", code, out, errOut, count())
	}
	out, _, code = run("purge", "--ended-before", "9d")
	if code != 0 || !strings.Contains(out, "purged 0 jobs") {
		t.Fatalf("purge older than 9 days: exit %d, %q", code, out)
	}
	out, errOut, code = run("purge", "--ended-before", "1w", "-s", "X", "-t", "a")
	if code != 0 || !strings.Contains(out, "purged 1 job (") || count() != 2 {
		t.Fatalf("purge -t a: exit %d, %q %q, %d jobs left", code, out, errOut, count())
	}
	out, errOut, code = run("purge", "--ended-before", "7d", strconv.FormatInt(ids[1], 10), strconv.FormatInt(ids[2], 10))
	if code != 1 || !strings.Contains(out, "purged 1 job (") || !strings.Contains(errOut, "job 3 does not exist, has not ended") || count() != 1 {
		t.Fatalf("purge of ids: exit %d, %q %q, %d jobs left", code, out, errOut, count())
	}
}

// adminRun runs cls with args against srv, as an admin over a pipe, and
// returns its stdout, stderr and exit code.
func adminRun(ctx context.Context, srv *server.Server) func(args ...string) (string, string, int) {
	return func(args ...string) (string, string, int) {
		var o, e bytes.Buffer
		env := mqcli.Env{Stdin: strings.NewReader(""), Stdout: &o, Stderr: &e, Getwd: func() (string, error) { return "/tmp", nil },
			Dial: func(context.Context) (io.ReadWriteCloser, error) {
				cl, sc := net.Pipe()
				go srv.ServeConn(ctx, sc, protocol.RoleAdmin)
				return cl, nil
			}}
		code := mqcli.Run(context.Background(), Cls(env), append([]string{"cls"}, args...))
		return o.String(), e.String(), code
	}
}
