package clscmd

import (
	"context"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/internal/metaqueue"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/protocol"
)

// TestQueueSetDefaults: cls queue set --cpus, --mem, --gpus, --resource
// store a queue's resource defaults, which later flags change kind by
// kind, --no-defaults clears, and a reopened metaqueue still has; bad
// values are one-line usage errors that change nothing.
func TestQueueSetDefaults(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "mq.db")
	open := func() *metaqueue.Store {
		st, err := metaqueue.Open(context.Background(), metaqueue.Options{Path: path, Sync: metaqueue.SyncNormal, Lease: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	st := open()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := &server.Server{Store: st}
	run := adminRun(ctx, srv)
	defaults := func() protocol.Resources {
		t.Helper()
		qs, err := st.Queues(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, q := range qs {
			if q.Name == "big" {
				return q.Defaults
			}
		}
		t.Fatal("no queue big")
		return protocol.Resources{}
	}
	steps := []struct {
		args []string
		want protocol.Resources
		out  string
	}{
		{[]string{"--cpus", "2", "--mem", "4G"}, protocol.Resources{CPUs: 2, Mem: 4 << 30}, "big: a job asks for cpus=2 mem=4 GiB unless it says"},
		{[]string{"--gpus", "1", "--resource", "lic=1"}, protocol.Resources{CPUs: 2, Mem: 4 << 30, GPUs: 1, Named: map[string]int{"lic": 1}}, "cpus=2 mem=4 GiB gpus=1 lic=1"},
		{[]string{"--mem", "auto", "--max-attempts", "5"}, protocol.Resources{CPUs: 2, MemAuto: true, GPUs: 1, Named: map[string]int{"lic": 1}}, "mem=auto"},
		{[]string{"--ceiling", "1h"}, protocol.Resources{CPUs: 2, MemAuto: true, GPUs: 1, Named: map[string]int{"lic": 1}}, "cpus=2"},
		{[]string{"--no-defaults", "--cpus", "auto"}, protocol.Resources{CPUsAuto: true}, "cpus=auto unless"},
		{[]string{"--no-defaults"}, protocol.Resources{}, ""},
		{[]string{"--cpus", "8"}, protocol.Resources{CPUs: 8}, "cpus=8"},
	}
	for _, s := range steps {
		out, stderr, code := run(append([]string{"queue", "set", "big"}, s.args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", s.args, code, stderr)
		}
		if got := defaults(); !reflect.DeepEqual(got, s.want) {
			t.Errorf("%v: defaults %+v, want %+v", s.args, got, s.want)
		}
		if s.out != "" && !strings.Contains(out, s.out) || s.out == "" && strings.Contains(out, "unless it says") {
			t.Errorf("%v: printed %q, want %q", s.args, out, s.out)
		}
	}
	for _, bad := range [][]string{
		{"--cpus", "0"}, {"--cpus", "1.5"}, {"--mem", "8X"}, {"--mem", "1e30"}, {"--gpus", "-1"},
		{"--resource", "9x=1"}, {"--resource", "a=1", "--resource", "a=2"},
	} {
		_, stderr, code := run(append([]string{"queue", "set", "big"}, bad...)...)
		if code != mqcli.ExitUsage || strings.Count(stderr, "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want a one-line usage error", bad, code, stderr)
		}
		if got := defaults(); !reflect.DeepEqual(got, protocol.Resources{CPUs: 8}) {
			t.Errorf("%v changed the defaults: %+v", bad, got)
		}
	}
	if out, _, _ := run("queue", "list"); !strings.Contains(out, "big: a job asks for cpus=8 unless it says") {
		t.Errorf("queue list:\n%s", out)
	}
	// The server refuses a bad request that skips the command's checks.
	if _, err := st.SetQueue(context.Background(), protocol.QueueSet{Name: "big", Defaults: &protocol.Resources{CPUs: -3}}); err == nil {
		t.Error("SetQueue took cpus -3")
	}
	cancel()
	st.Close()
	st = open()
	defer st.Close()
	if got := defaults(); !reflect.DeepEqual(got, protocol.Resources{CPUs: 8}) {
		t.Errorf("after reopening: %+v", got)
	}
}
