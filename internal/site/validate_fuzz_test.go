package site

import (
	"net"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"

	"github.com/mq-hpc/mq/internal/shellwords"
	"github.com/mq-hpc/mq/internal/site/batch"
	"github.com/mq-hpc/mq/protocol"
)

// FuzzValidate: a site spec comes from cls site add (an admin key may
// send one over SSH) and its words end up in a batch script's directive
// lines and in a shell command on the login host. Whatever it holds,
// Validate does not panic and refuses with one line; a spec it accepts
// is accepted again unchanged, and its queue, parallel environment,
// submit arguments, addresses and named amounts stay one word each where
// they are written.
func FuzzValidate(f *testing.F) {
	for _, s := range []protocol.SiteSpec{
		{Name: "a", Type: SGE, SSH: "u@h:2222", Slots: 4, PE: "smp", Mem: 8 << 30, Resources: "lic=2,scratch=10", Walltime: 4 * 3600},
		{Name: "b", Type: Slurm, SSH: "u@[::1]:22", Queue: "short", SubmitArgs: `-A proj --comment='a b'`, Connect: Tunnel, DataRoot: "/scratch/mq"},
		{Name: "c", Type: PBS, SSH: "user@login.example.org", CLSAddr: "node1:2222", GPUs: 2, Max: 4, Min: 1, Idle: 300, Price: 0.5},
		{Name: "d", Type: Slurm, SSH: "u@h", CLSAddr: "[fe80::1]", DataRoot: "/tmp/mq", NodeLocal: true, Provision: "dbc-cost"},
		{Name: "e", Type: Local, Max: 2, Output: protocol.OutputModeFiles},
		{Name: "f", Type: SGE, SSH: "u@h", Queue: "all.q", Slots: 8, SubmitArgs: `-l "h_vmem=2G,mem=1G"`, ConnectTimeout: 120},
		{Name: "g", Type: PBS, SSH: "u@h", Queue: "a b", PE: "x", DataRoot: "d/../../etc"},
	} {
		f.Add(s.Name, s.Type, s.SSH, s.Queue, s.SubmitArgs, s.Connect, s.CLSAddr, s.DataRoot, s.PE, s.Resources, s.Provision, s.Output,
			s.Min, s.Max, s.Slots, s.GPUs, s.Mem, s.Walltime, s.Idle, s.Price, s.SharedFS, s.NodeLocal)
	}
	f.Fuzz(func(t *testing.T, name, typ, ssh, queue, submitArgs, connect, clsAddr, dataRoot, pe, resources, provision, output string,
		minN, maxN, slots, gpus int, mem int64, walltime, idle, price float64, sharedFS, nodeLocal bool) {
		spec := protocol.SiteSpec{Name: name, Type: typ, SSH: ssh, Queue: queue, SubmitArgs: submitArgs, Connect: connect, CLSAddr: clsAddr,
			DataRoot: dataRoot, PE: pe, Resources: resources, Provision: provision, Output: output, Min: minN, Max: maxN, Slots: slots,
			GPUs: gpus, Mem: mem, Walltime: walltime, Idle: idle, Price: price, SharedFS: sharedFS, NodeLocal: nodeLocal}
		if err := Validate(&spec); err != nil {
			if strings.ContainsAny(err.Error(), "\n\r") {
				t.Fatalf("Validate(%+v): %q, want one line", spec, err)
			}
			return
		}
		again := spec
		if err := Validate(&again); err != nil || again != spec {
			t.Fatalf("Validate(%+v) accepted it, then %v with %+v", spec, err, again)
		}
		named, err := ParseResources(spec.Resources)
		if err != nil || FormatResources(named) != spec.Resources {
			t.Fatalf("resources %q read back as %v (%v)", spec.Resources, named, err)
		}
		if spec.Type == Local {
			return
		}
		if _, addr, err := ParseSSH(spec.SSH); err != nil {
			t.Fatalf("--ssh %q: %v", spec.SSH, err)
		} else if host, port, err := net.SplitHostPort(addr); err != nil || host == "" || port == "" {
			t.Fatalf("--ssh %q: address %q (%v)", spec.SSH, addr, err)
		}
		if addr := CLSAddrFor(spec, "cls.example.org:2222"); !dialable(addr) {
			t.Fatalf("--cls-addr %q: placeholders would dial %q", spec.CLSAddr, addr)
		}
		if root := DataRoot(spec, "/home/u"); root != "" && !path.IsAbs(spec.DataRoot) && root != "/home/u" && !strings.HasPrefix(root, "/home/u/") {
			t.Fatalf("--data-root %q is %q, outside the login home", spec.DataRoot, root)
		}
		// Each directive has as many words as it would with a plain queue
		// and parallel environment: nothing in them starts another option
		// or another line.
		b := ForType(spec.Type)
		req := batch.Request{Name: JobName(spec.Name, "0123abcd"), Queue: spec.Queue, Walltime: protocol.Duration(spec.Walltime),
			Slots: spec.Slots, Mem: spec.Mem, GPUs: spec.GPUs, PE: spec.PE, LogDir: "/home/u/.mq-sites/x/log"}
		plain := req
		if plain.Queue != "" {
			plain.Queue = "q"
		}
		if plain.PE != "" {
			plain.PE = "pe"
		}
		got, want := b.Directives(req), b.Directives(plain)
		if len(got) != len(want) {
			t.Fatalf("directives %q, want as many as %q", got, want)
		}
		for i, d := range got {
			if strings.ContainsFunc(d, unicode.IsControl) || len(strings.Fields(d)) != len(strings.Fields(want[i])) {
				t.Fatalf("directive %q, want the words of %q", d, want[i])
			}
		}
		args, err := SplitArgs(spec.SubmitArgs)
		if err != nil {
			t.Fatalf("--submit-args %q accepted, then %v", spec.SubmitArgs, err)
		}
		const script = "/home/u/.mq-sites/x/placeholder.sh"
		words, err := shellwords.Split(b.SubmitCommand(script, args))
		if err != nil || len(words) < len(args)+2 || words[len(words)-1] != script || !slices.Equal(words[len(words)-1-len(args):len(words)-1], args) {
			t.Fatalf("submit command %q reads as %q (%v), want the arguments %q then the script", b.SubmitCommand(script, args), words, err, args)
		}
	})
}

// dialable says whether addr is HOST:PORT with a port in 1..65535.
func dialable(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	n, err := strconv.Atoi(port)
	return err == nil && n >= 1 && n <= 65535
}
