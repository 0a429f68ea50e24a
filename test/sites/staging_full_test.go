//go:build e2e

package sites

import (
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestStagingSiteDiskFull: the job's directory in slurmy's data root is a
// small tmpfs, filled: the transfer of the job's input there fails
// (OpenSSH's sftp-server says only "Failure"), and the CLS, asking the
// server for the room left over the same connection, takes it for the
// site's fault: the job is neither failed nor lost but waits, its
// transfers say the site has no room, cls site list says staging there is
// paused. Once room is back the input is staged again after the backoff
// and the job runs once, and cls site list says nothing more.
func TestStagingSiteDiskFull(t *testing.T) {
	f := newFaultSetup(t)
	out := f.bigInput(t, "in/small", 512<<10) // under 1 MiB: no room check before sending
	dir := f.root + f.c.work
	mountTmpfs(t, dir, 4<<20, secondUser)
	fill := filepath.Join(dir, "fill")
	fillTo(t, fill, 64<<10)
	f.c.must("mqsub", "--in", "in/small", "--out", "out/sum", "full", "mkdir -p out && cksum in/small > out/sum")
	var j protocol.JobInfo
	var d protocol.JobDetail
	eventually(t, 3*time.Minute, "two transfers to slurmy refused for want of room", func() bool {
		for _, x := range f.c.jobs("") {
			if x.Target == "full" {
				j = x
			}
		}
		if j.State != "Q" {
			t.Fatalf("the job is %s (%s) while slurmy's disk is full; want it queued", j.State, j.Reason)
		}
		json.Unmarshal([]byte(f.c.must("mqstat", "-j", strconv.FormatInt(j.ID, 10), "--json")), &d)
		full := 0
		for _, tr := range d.Transfers {
			if tr.To == "slurmy" && strings.Contains(tr.Error, "slurmy has no room (its jobs wait") {
				full++
			}
		}
		return full >= 2
	})
	for _, tr := range d.Transfers {
		if !strings.Contains(tr.Error, "no space left in "+filepath.Join(dir, "in")) {
			t.Errorf("transfer %+v: the error does not name the full directory", tr)
		}
	}
	if s := f.c.sites()["slurmy"]; !strings.HasPrefix(s.Staging, "data root full since ") {
		t.Errorf("cls site list: slurmy's staging note %q; want it to say the data root is full", s.Staging)
	}
	if err := os.Remove(fill); err != nil {
		t.Fatal(err)
	}
	f.checkRanOnce(t, "full", "in/small", out)
	if s := f.c.sites()["slurmy"]; s.Staging != "" {
		t.Errorf("cls site list: slurmy's staging note %q after a transfer there succeeded", s.Staging)
	}
}

// mountTmpfs mounts a tmpfs of size bytes on dir, owned by account name
// (mode 0700), unmounted at the end.
func mountTmpfs(t *testing.T, dir string, size int64, name string) {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Skipf("no user %s", name)
	}
	opts := "size=" + strconv.FormatInt(size, 10) + ",mode=0700,uid=" + u.Uid + ",gid=" + u.Gid
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", opts, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() {
		if exec.Command("umount", dir).Run() != nil {
			exec.Command("umount", "-l", dir).Run()
		}
	})
}

// fillTo writes the file name until its filesystem has about leave
// bytes left.
func fillTo(t *testing.T, name string, leave int64) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(filepath.Dir(name), &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	if err := os.WriteFile(name, make([]byte, max(free-leave, 0)), 0o600); err != nil && !errors.Is(err, syscall.ENOSPC) {
		t.Fatal(err)
	}
}
