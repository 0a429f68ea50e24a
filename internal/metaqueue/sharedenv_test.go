package metaqueue

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestSharedEnvStoredOnce: an array of 1,000 jobs with an environment
// shared by the submission (mqsub -V --array) stores it once, in one row,
// not with each job; every job is handed it under its own variables,
// which win; a restart keeps it; one over the bound is refused.
func TestSharedEnvStoredOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	shared := map[string]string{"PATH": "/opt/x/bin:/usr/bin", "CONDA_PREFIX": "/opt/conda/envs/x", "A": "shared"}
	for i := range 40 { // about 2 KB, as a shell's environment is
		shared["V"+strconv.Itoa(i)] = strings.Repeat("v", 40)
	}
	const n = 1000
	b, err := e.s.NewBulk()
	if err != nil {
		t.Fatal(err)
	}
	var specs []protocol.JobSpec
	for i := range n {
		env := map[string]string{"MQ_ARRAY_INDEX": strconv.Itoa(i + 1)}
		if i == 0 {
			env["A"] = "own"
		}
		specs = append(specs, protocol.JobSpec{Target: "t", Command: "true", Env: env})
	}
	if err := b.Add(1, specs); err != nil {
		t.Fatal(err)
	}
	if err := b.Array("1-1000", 0); err != nil {
		t.Fatal(err)
	}
	if err := b.SharedEnv(shared); err != nil {
		t.Fatal(err)
	}
	first, err := b.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}

	db := openRaw(t, e.opt.Path)
	var rows, sharedBytes, ownBytes int
	if err := db.QueryRow("SELECT count(*), coalesce(sum(length(env)), 0) FROM submit_env").Scan(&rows, &sharedBytes); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow("SELECT coalesce(sum(length(env)), 0) FROM job_env").Scan(&ownBytes); err != nil {
		t.Fatal(err)
	}
	t.Logf("shared environment: %d row, %d bytes; the jobs' own: %d bytes (%d each)", rows, sharedBytes, ownBytes, ownBytes/n)
	if rows != 1 || sharedBytes < 2000 {
		t.Fatalf("submit_env: %d rows, %d bytes; want the environment once", rows, sharedBytes)
	}
	if ownBytes > n*40 {
		t.Fatalf("job_env holds %d bytes for %d jobs: the shared environment was copied into them", ownBytes, n)
	}

	e.reopen()
	ph := e.register("s")
	r, err := e.s.Next(ctx, protocol.Next{Placeholder: ph, Free: n})
	if err != nil || len(r.Jobs) != n {
		t.Fatalf("Next: %d jobs, %v", len(r.Jobs), err)
	}
	for _, a := range r.Jobs {
		got := map[string]string{}
		for _, kv := range a.Env {
			k, v, _ := strings.Cut(kv, "=")
			got[k] = v
		}
		want := maps.Clone(shared)
		want["MQ_ARRAY_INDEX"] = strconv.FormatInt(a.ID-first+1, 10)
		if a.ID == first {
			want["A"] = "own"
		}
		if !maps.Equal(got, want) {
			t.Fatalf("job %d's environment %v, want %v", a.ID, got, want)
		}
	}

	// A job submitted after, alone, does not get it.
	id := e.submit1("u", "true")
	if as := e.next(ph, 1); len(as) != 1 || as[0].ID != id || len(as[0].Env) != 0 {
		t.Fatalf("a later job: %+v, want job %d with no environment", as, id)
	}

	b, err = e.s.NewBulk()
	if err != nil {
		t.Fatal(err)
	}
	defer b.Abort()
	big := map[string]string{"BIG": strings.Repeat("x", protocol.MaxEnvBytes)}
	errCode(t, b.SharedEnv(big), protocol.CodeBadRequest)
	errCode(t, b.SharedEnv(map[string]string{"MQ_JOB_ID": "1"}), protocol.CodeBadRequest)
}
