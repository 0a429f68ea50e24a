package site

import (
	"slices"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

func TestValidateResources(t *testing.T) {
	t.Parallel()
	base := func() protocol.SiteSpec {
		return protocol.SiteSpec{Name: "c", Type: Slurm, SSH: "u@h", Slots: 16}
	}
	for _, tc := range []struct {
		name string
		edit func(*protocol.SiteSpec)
		want string // "" = valid
	}{
		{"cores only", func(*protocol.SiteSpec) {}, ""},
		{"all", func(s *protocol.SiteSpec) {
			s.Mem, s.GPUs, s.Resources = 64<<30, 2, "matlab=1"
		}, ""},
		{"negative memory", func(s *protocol.SiteSpec) { s.Mem = -1 }, "--mem must be"},
		{"absurd memory", func(s *protocol.SiteSpec) { s.Mem = 1 << 60 }, "--mem must be"},
		{"negative gpus", func(s *protocol.SiteSpec) { s.GPUs = -1 }, "--gpus must be 0..64"},
		{"too many gpus", func(s *protocol.SiteSpec) { s.GPUs = 65 }, "--gpus must be 0..64"},
		{"resource not a name", func(s *protocol.SiteSpec) { s.Resources = "a-b=1" }, `"a-b" is not a name`},
		{"resource zero", func(s *protocol.SiteSpec) { s.Resources = "lic=0" }, `resource "lic=0"`},
		{"resource named cpus", func(s *protocol.SiteSpec) { s.Resources = "cpus=2" }, "has its own flag"},
		{"resource twice", func(s *protocol.SiteSpec) { s.Resources = "lic=1,lic=2" }, "given twice"},
		{"local GPUs, one placeholder", func(s *protocol.SiteSpec) {
			*s = protocol.SiteSpec{Name: "g", Type: Local, GPUs: 4, Max: 1}
		}, ""},
		{"local GPUs shared", func(s *protocol.SiteSpec) {
			*s = protocol.SiteSpec{Name: "g", Type: Local, GPUs: 4, Max: 2}
		}, "--gpus on a local site needs --max 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			tc.edit(&s)
			err := Validate(&s)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate = %v; want %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("two lines: %q", err)
			}
		})
	}
}

func TestAgentArgs(t *testing.T) {
	t.Parallel()
	s := protocol.SiteSpec{Name: "c", Type: Slurm, SSH: "u@h", Slots: 8, Mem: 30 << 30, GPUs: 2, Resources: "scratch=100,lic=2"}
	if err := Validate(&s); err != nil || s.Resources != "lic=2,scratch=100" {
		t.Fatalf("Validate: %v, resources %q; want them by name", err, s.Resources)
	}
	got := AgentArgs(s, s.Mem)
	want := []string{"--slots", "8", "--gpus", "2", "--mem", "30720M", "--resource", "lic=2", "--resource", "scratch=100"}
	if !slices.Equal(got, want) {
		t.Errorf("AgentArgs = %q; want %q", got, want)
	}
	// A site that asks for no GPUs says so: GPUs a variable names are not its.
	if got := AgentArgs(protocol.SiteSpec{Slots: 1}, 0); !slices.Equal(got, []string{"--slots", "1", "--gpus", "0"}) {
		t.Errorf("cores only: %q", got)
	}
	if got := MemArg(1536 << 10); got != "1536K" {
		t.Errorf("MemArg(1.5 MiB) = %q", got)
	}
	if got := Capacity(s).String(); got != "cpus=8 mem=30 GiB gpus=0,1 lic=2 scratch=100" {
		t.Errorf("Capacity = %q", got)
	}
}

func TestGivenNote(t *testing.T) {
	t.Parallel()
	m := &Manager{}
	m.sites = map[string]*managed{}
	ms := &managed{spec: protocol.SiteSpec{Name: "c", Type: Slurm}, connected: map[int64]int{}, connBatch: map[int64]string{},
		batch: map[string]bool{}, given: map[int64]string{}, offered: map[int64]string{}, known: map[string]*tracked{}}
	m.sites["c"] = ms
	note := "asked 16 cpus, given 8 (SLURM_CPUS_ON_NODE)"
	eight := &protocol.Capacity{CPUs: 8, Mem: 32 << 30}
	m.Placeholder(1, protocol.Register{Site: "c", CapacityNote: note, Capacity: eight}, true)
	m.Placeholder(2, protocol.Register{Site: "c", CapacityNote: note, Capacity: eight}, true)
	m.Placeholder(3, protocol.Register{Site: "c", Capacity: &protocol.Capacity{CPUs: 16}}, true)
	if got := m.infoLocked(ms).Given; got != note+" (2 placeholders)" {
		t.Errorf("Given = %q", got)
	}
	if got := m.infoLocked(ms).Offered; got != "cpus=16; cpus=8 mem=32 GiB (2 placeholders)" {
		t.Errorf("Offered = %q", got)
	}
	m.Placeholder(1, protocol.Register{Site: "c"}, false)
	m.Placeholder(2, protocol.Register{Site: "c"}, false)
	if got := m.infoLocked(ms).Given; got != "" {
		t.Errorf("Given = %q after they left; want none", got)
	}
}
