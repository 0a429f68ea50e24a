package clscmd

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	mqcli "github.com/mq-hpc/mq/cmd/internal/cli"
	"github.com/mq-hpc/mq/cmd/internal/cli/clitest"
	"github.com/mq-hpc/mq/internal/server"
	"github.com/mq-hpc/mq/internal/shellwords"
	"github.com/mq-hpc/mq/protocol"
)

// FuzzSSHExec: a command line a user or admin key sends over SSH is run
// in-process by the CLS (sshExec), so every flag parser of mqsub, mqstat,
// mqdel, mqhold, mqrls, mqalter, cls queue, cls files and cls site reads
// it, and mqsub the #MQ lines of the script a job runs. Whatever the
// line, stdin and script, the command ends, does not panic, and a usage
// error (exit 2) is one line on stderr (after any warnings). The CLS
// here answers every request with an error, so what runs is the
// commands' own parsing.
func FuzzSSHExec(f *testing.F) {
	home := f.TempDir()
	f.Setenv("HOME", home) // sshExec's working directory
	f.Chdir(f.TempDir())   // where a relative -O would land
	script := "#!/bin/sh\n#MQ --time 4:00:00 -c 8\n#MQ --mem 2G --array 1-4\n#MQ -v A='x y' --in data.fa:10M\necho hi\n"
	jobs := `{"target":"t","command":"echo a"}` + "\n" + `{"target":"t","command":"echo b","prereqs":["x"],"mem":"512K"}` + "\n"
	for _, s := range []struct {
		line, stdin string
		admin       bool
	}{
		{`mqsub -q q T "echo hi"`, "", false},
		{`mqsub --array 1-10:2%3 T 'echo {}'`, "", false},
		{`mqsub --time 1-02:00:00 --est 2h --mem 2G -c 4 --gpus 1 --resource lic=2 T cmd`, "", false},
		{`mqsub --in data.fa:10M --out res:512K -d /tmp -o out.txt -e err.txt T cmd`, "", false},
		{`mqsub -v A=1 -v B=x,y --priority -5 -H --after-any a,b -p c T cmd`, "", false},
		{`mqsub -V T cmd`, "", false},
		{`mqsub -f -`, jobs, false},
		{`mqsub -b --timeout 1s T ./job.sh`, "", false},
		{`mqsub T sh job.sh`, "", false},
		{`mqsub -c 2 T 'bash ./job.sh arg'`, "", false},
		{`mqsub T cmd`, "data on stdin", false},
		{`mqsub --rerun -s F -t T`, "", false},
		{`mqsub --rerun 7 --command 'echo fixed'`, "", false},
		{`mqsub --wfformat trace.json --time-scale 0.5 --size-scale 2 --target-prefix w-`, "", false},
		{`mqsub -l h_rt=1:00:00,mem_free=2G --gres gpu:2 T cmd`, "", false},
		{`mqstat -s E`, "", false},
		{`mqstat -j 7 --cat 7 -O out.txt`, "", false},
		{`mqstat --watch 2s -q default`, "", false},
		{`mqstat --acct -t T --summary`, "", false},
		{`mqstat --format id,state,where,elapsed --noheader -s DF`, "", false},
		{`mqstat 501 502,600-610 -q default --limit 5`, "", false},
		{`mqstat --format=JobID,bogus 7-`, "", false},
		{`mqdel -s QW --all`, "", false},
		{`mqdel 3-9`, "", false},
		{`mqdel 1,2,3 4`, "", false},
		{`mqhold -q default -t T`, "", false},
		{`mqrls 5`, "", false},
		{`mqalter --priority 5 --est 10m --time 2h 7`, "", false},
		{`cls queue set q --policy sjf --max-attempts 4 --budget 100 --deadline 2h --ceiling 04:00:00`, "", false},
		{`cls queue set q --cpus auto --mem 8G --gpus 1 --resource lic=1 --max-output 1M --output files`, "", false},
		{`cls queue set q --no-defaults --deadline 2026-12-01T00:00:00Z`, "", false},
		{`cls queue list`, "", false},
		{`cls files list`, "", false},
		{`cls files add --site a data/in.fa`, "", false},
		{`cls files get --site a data/in.fa`, "", false},
		{`cls site add a --type sge --ssh u@h:2222 --slots 4 --pe smp --mem 8G --resource lic=2,scratch=10 --walltime 4h`, "", true},
		{`cls site add b --type slurm --ssh u@[::1]:22 --queue short --submit-args "--account=x" --connect tunnel --data-root /scratch/mq`, "", true},
		{`cls site set a --max 8 --idle 5m --cls-addr node1:2222`, "", true},
		{`cls site add a --type local --max 2`, "", false},
	} {
		f.Add(s.line, []byte(s.stdin), []byte(script), s.admin)
	}
	f.Fuzz(func(t *testing.T, line string, stdin, script []byte, admin bool) {
		words, err := shellwords.Split(line)
		if err != nil || len(words) == 0 {
			return // the SSH endpoint answers these itself
		}
		// A script in the home directory whose #MQ lines mqsub reads as
		// flags (mqsub T ./job.sh).
		if err := os.WriteFile(filepath.Join(home, "job.sh"), script, 0o755); err != nil {
			t.Fatal(err)
		}
		dial := clitest.Dial(nil) // hello, then every request refused
		dialCLS := func(server.Peer) io.ReadWriteCloser {
			c, err := dial(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		who := server.Peer{MaxRole: protocol.RoleUser}
		if admin {
			who.MaxRole = protocol.RoleAdmin
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		var out, errOut bytes.Buffer
		done := make(chan int, 1)
		go func() { done <- sshExec(dialCLS)(ctx, who, words, bytes.NewReader(stdin), &out, &errOut) }()
		var code int
		select {
		case code = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("%q: still running after 30s", words)
		}
		msg := errOut.String()
		// Warnings may come first; the error is one line.
		errLines := 0
		for _, l := range strings.SplitAfter(msg, "\n") {
			if l != "" && !strings.Contains(l, ": warning: ") {
				errLines++
			}
		}
		if code == mqcli.ExitUsage && (errLines != 1 || !strings.HasSuffix(msg, "\n")) {
			t.Fatalf("%q: exit 2 with stderr %q, want one line", words, msg)
		}
		if code != 0 && msg == "" {
			t.Fatalf("%q: exit %d and nothing on stderr", words, code)
		}
		if strings.ContainsAny(msg, "\r\x00\x1b") {
			t.Fatalf("%q: stderr %q holds a control character", words, msg)
		}
	})
}
