// Package otheruser gives tests another local user of the machine to act
// as (with runuser), for the checks that what mq makes cannot be read or
// redirected by other users. Only tests import it.
package otheruser

import (
	"errors"
	"os"
	"os/exec"
	"os/user"
	"strconv"
	"testing"
	"time"
)

// Name is the unprivileged user tests act as.
const Name = "mqagent"

// Need returns the user Name, made if missing, with its uid and gid. It
// skips t unless t runs as root with useradd and runuser.
func Need(t testing.TB) (u *user.User, uid, gid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create the user " + Name + " and run programs as it (runuser); this test runs as uid " + strconv.Itoa(os.Geteuid()))
	}
	for _, p := range []string{"useradd", "runuser"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Skipf("%s is not installed", p)
		}
	}
	u, err := user.Lookup(Name)
	// Tests at once (parallel ones, other packages' processes) may each
	// find the user missing: useradd then fails for the one made meanwhile
	// (exit 9) or for the password file another useradd has locked.
	for deadline := time.Now().Add(time.Minute); err != nil; u, err = user.Lookup(Name) {
		if time.Now().After(deadline) {
			t.Fatalf("no user %s: %v", Name, err)
		}
		out, addErr := exec.Command("useradd", "-m", "-s", "/bin/sh", Name).CombinedOutput()
		var ee *exec.ExitError
		if addErr != nil && !(errors.As(addErr, &ee) && ee.ExitCode() == 9) {
			t.Logf("useradd %s: %v: %s", Name, addErr, out)
		}
		if addErr != nil {
			time.Sleep(100 * time.Millisecond)
		}
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return u, uid, gid
}

// SharedDir returns a new directory every user may write and only an
// entry's owner may remove from, as /tmp; it is removed when t ends.
func SharedDir(t testing.TB, pattern string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return dir
}

// Symlink makes newname a symbolic link to oldname owned by the other
// user (uid, gid: Need's), as that user would have made it first.
func Symlink(t testing.TB, oldname, newname string, uid, gid int) {
	t.Helper()
	if err := os.Symlink(oldname, newname); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(newname, uid, gid); err != nil {
		t.Fatal(err)
	}
}
