package agentcmd

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/internal/resource"
	"github.com/mq-hpc/mq/internal/shellwords"
	"github.com/mq-hpc/mq/internal/site"
	"github.com/mq-hpc/mq/internal/wire"
	"github.com/mq-hpc/mq/protocol"
)

// FuzzArgs: mqagent's command line is written by the CLS from a site's
// settings (site.AgentArgs, into the batch script) or by whoever starts
// an agent by hand. Whatever it holds, parsing and checking it does not
// panic and refuses in one line; and for any site settings cls site add
// accepts, the command line the CLS writes is one the agent takes, asking
// for the site's capacity.
func FuzzArgs(f *testing.F) {
	for _, s := range []struct {
		line      string
		slots     int
		gpus      int
		mem       int64
		resources string
		walltime  float64
	}{
		{"--cls h:22 --host-key SHA256:x --key k --site s --out /o --slots 4 --mem 8G --gpus 2 --resource lic=2", 4, 2, 8 << 30, "lic=2,scratch=10", 4 * 3600},
		{"--cls [::1]:2222 --site s --out o --cpus 2 --mem 1536K --walltime 1h --idle 5m --reconnect 1m --max-output 512K --output-reserve 64M", 1, 0, 1536 << 10, "", 3600},
		{"--cls h:22 --site s --out /o --via u@login:22 --via-host-key 'ssh-ed25519 AAAA' --data-root .mq-data/x --log-level debug --log-format json", 8, 0, 1<<50 - 1, "a=1", 366 * 24 * 3600},
		{"--cls h:22 --site s --out /o --mem=", 4096, 64, 1, "", 60},
	} {
		f.Add(s.line, s.slots, s.gpus, s.mem, s.resources, s.walltime)
	}
	f.Fuzz(func(t *testing.T, line string, slots, gpus int, mem int64, resources string, walltime float64) {
		if words, err := shellwords.Split(line); err == nil {
			if fl, _, err := parse("mqagent", Remote, words, io.Discard); err != nil {
				if strings.ContainsAny(err.Error(), "\n\r") {
					t.Fatalf("%q: %q, want one line", words, err)
				}
			} else if fl != nil {
				if _, err := fl.check(Remote); err != nil && strings.ContainsAny(err.Error(), "\n\r") {
					t.Fatalf("%q: %q, want one line", words, err)
				}
			}
		}
		spec := protocol.SiteSpec{Name: "s", Type: site.Slurm, SSH: "u@h", Slots: slots, GPUs: gpus, Mem: mem, Resources: resources, Walltime: walltime}
		if site.Validate(&spec) != nil {
			return
		}
		// As the batch script has it (site.Remote's writeScript).
		args := []string{"--cls", "h:22", "--host-key", "SHA256:x", "--key", "/k", "--site", spec.Name}
		args = append(args, site.AgentArgs(spec, spec.Mem)...)
		args = append(args, "--walltime", wire.AgentWalltime(protocol.Duration(spec.Walltime)).String(),
			"--idle", protocol.Duration(spec.Idle).String(), "--out", "/o")
		fl, _, err := parse("mqagent", Remote, args, io.Discard)
		if err != nil || fl == nil {
			t.Fatalf("site %+v: the agent refuses %q: %v", spec, args, err)
		}
		o, err := fl.check(Remote)
		if err != nil {
			t.Fatalf("site %+v: the agent refuses %q: %v", spec, args, err)
		}
		want := site.Capacity(spec)
		want.Mem = (want.Mem + resource.KiB - 1) / resource.KiB * resource.KiB // --mem is in whole KiB (site.MemArg)
		if !reflect.DeepEqual(o.asked, want) {
			t.Fatalf("site %+v: the agent asks for %v, the site for %v", spec, o.asked, want)
		}
		if fl.walltime <= 0 || fl.walltime > time.Duration(spec.Walltime*float64(time.Second)) {
			t.Fatalf("site walltime %gs: the agent's %v", spec.Walltime, fl.walltime)
		}
	})
}
