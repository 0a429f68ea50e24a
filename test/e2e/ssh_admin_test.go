//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// TestSSHSiteAdminRole: over the real SSH endpoint, a user-role key may not
// administer sites (a local site would make a `--local 0` CLS start
// processes; a batch site would log in with the owner's SSH keys): the
// subsystem answers forbidden, `cls site` is not a command for it, and the
// refusals are logged with the key. A key added with --role admin may, as
// the owner may on the socket.
func TestSSHSiteAdminRole(t *testing.T) {
	requireSSH(t)
	h := newHarness(t)
	s := h.startSSHCLS("--local", "0")
	user := h.newKey("user", "u")
	admin := h.newKey("admin", "adm")
	userFP := h.keyFP("u")

	replies, r := s.subsystem(user, `{"id":1,"op":"hello","body":{"proto":1,"client":"e2e"}}`,
		`{"id":2,"op":"site.add","body":{"name":"evil","type":"local","max":2,"slots":1}}`,
		`{"id":3,"op":"site.remove","body":{"name":"local"}}`,
		`{"id":4,"op":"hello","body":{"proto":1,"role":"admin"}}`)
	if !strings.Contains(string(replies[1]), `"role":"user"`) {
		t.Errorf("hello with a user key: %s (%s)", replies[1], r)
	}
	for id := uint64(2); id <= 3; id++ {
		if !strings.Contains(string(replies[id]), `"code":"forbidden"`) || !strings.Contains(string(replies[id]), "needs the admin role") {
			t.Errorf("site request %d with a user key: %s; want forbidden", id, replies[id])
		}
	}
	// Nor can it claim the admin role on a new connection.
	replies, _ = s.subsystem(user, `{"id":1,"op":"hello","body":{"proto":1,"role":"admin"}}`)
	if !strings.Contains(string(replies[1]), `"code":"forbidden"`) {
		t.Errorf("hello as admin with a user key: %s; want forbidden", replies[1])
	}
	for _, cmd := range []string{"cls site add evil --type local", "cls site remove local"} {
		if r := s.ssh(user, cmd); r.code != 2 || !strings.Contains(r.stderr, "`cls site` over SSH needs a key with the admin role") {
			t.Errorf("ssh %s with a user key: %s; want refused", cmd, r)
		}
	}
	var sl protocol.SiteList
	if err := json.Unmarshal([]byte(h.ok("cls", "site", "list", "--json")), &sl); err != nil {
		t.Fatal(err)
	}
	if len(sl.Sites) != 0 {
		t.Errorf("sites after a user key's attempts: %+v; want none", sl.Sites)
	}
	if n := len(h.agents()); n != 0 {
		t.Errorf("a --local 0 CLS runs %d placeholders after a user key's attempts", n)
	}
	log := readFile(t, filepath.Join(h.home, "cls.log"))
	found := 0
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "refused an admin request") && strings.Contains(line, userFP) {
			found++
		}
	}
	if found < 2 {
		t.Errorf("cls.log has %d refusals of site ops naming key %s; want 2:\n%s", found, userFP, clip(log))
	}

	// An admin key may: over the subsystem and as a command.
	replies, _ = s.subsystem(admin, `{"id":1,"op":"hello","body":{"proto":1,"client":"e2e"}}`)
	if !strings.Contains(string(replies[1]), `"role":"admin"`) {
		t.Errorf("hello with an admin key: %s", replies[1])
	}
	if r := s.ssh(admin, "cls site add mine --type local --max 1 --idle 5s"); r.code != 0 || !strings.Contains(r.stdout, "added site mine (local)") {
		t.Errorf("ssh cls site add with an admin key: %s", r)
	}
	if r := s.ssh(admin, "cls site list"); r.code != 0 || !strings.Contains(r.stdout, "mine") {
		t.Errorf("ssh cls site list with an admin key: %s", r)
	}
	// And the owner on the socket, as before.
	if out := h.ok("cls", "site", "remove", "mine"); !strings.Contains(out, "removed site mine") {
		t.Errorf("cls site remove on the socket: %q", out)
	}
	waitFor(t, 20*time.Second, func() error {
		if n := len(h.agents()); n != 0 {
			return fmt.Errorf("%d placeholders still running after the site was removed", n)
		}
		return nil
	})
}
