package placeholder

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mq-hpc/mq/internal/otheruser"
	"github.com/mq-hpc/mq/protocol"
)

// TestScratchCommitOtherUsersLink: a replicated job runs in a shared
// sticky directory (as /tmp) with its output in out/; another user
// (mqagent) made out a link to a directory of ours first. The winner's
// commit must not move its output through that link, over our file of
// that name.
func TestScratchCommitOtherUsersLink(t *testing.T) {
	_, uid, gid := otheruser.Need(t)
	work := otheruser.SharedDir(t, "mqscratch-link-")
	mine := t.TempDir()
	victim := filepath.Join(mine, "res")
	os.WriteFile(victim, []byte("precious\n"), 0o600)
	out := filepath.Join(work, "out")
	otheruser.Symlink(t, mine, out, uid, gid)
	a := &Agent{}
	s, err := a.newScratch(work, protocol.Assignment{ID: 7, Attempt: 1, Scratch: true, Cwd: work,
		Outputs: []protocol.AssignedFile{{Path: filepath.Join(work, "out", "res")}}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Remove()
	if err := os.WriteFile(filepath.Join(s.Path(), "out", "res"), []byte("job output\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(func() {}); err == nil {
		t.Errorf("commit through mqagent's link: kept, want refused")
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("the commit moved the output through mqagent's link: our file holds %q", b)
	}
}
