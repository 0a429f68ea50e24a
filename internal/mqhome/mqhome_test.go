package mqhome

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// nobody is a uid that is not this test's (for chown, as root only).
const nobody = 65534

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		mode       fs.FileMode // of MQ_HOME
		parentMode fs.FileMode // of its parent (0: 0700)
		chown      bool        // MQ_HOME owned by another user (root only)
		wantErr    string
		wantWarn   string
	}{
		{name: "private", mode: 0o700},
		{name: "readable", mode: 0o755, wantWarn: "is mode 0755: other users can read"},
		{name: "group-readable", mode: 0o750, wantWarn: "chmod 700"},
		{name: "world-writable", mode: 0o777, wantErr: "is writable by others (mode 0777)"},
		{name: "group-writable", mode: 0o770, wantErr: "is writable by others (mode 0770)"},
		{name: "sticky world-writable", mode: 0o777 | fs.ModeSticky, wantErr: "mode 1777"},
		{name: "parent writable", mode: 0o700, parentMode: 0o777, wantErr: "writable by others and not sticky (mode 0777)"},
		{name: "parent sticky", mode: 0o700, parentMode: 0o777 | fs.ModeSticky},
		{name: "foreign owner", mode: 0o700, chown: true, wantErr: "(mode 0700) is owned by uid 65534, not by you"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.chown && os.Geteuid() != 0 {
				t.Skip("needs root to give the directory to another user")
			}
			parent := filepath.Join(t.TempDir(), "p")
			home := filepath.Join(parent, "home")
			if err := os.MkdirAll(home, 0o700); err != nil {
				t.Fatal(err)
			}
			pm := tc.parentMode
			if pm == 0 {
				pm = 0o700
			}
			mustChmod(t, parent, pm)
			mustChmod(t, home, tc.mode)
			if tc.chown {
				if err := os.Chown(home, nobody, nobody); err != nil {
					t.Fatal(err)
				}
			}
			_, warn, err := Check(home)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), home) || strings.Contains(err.Error(), "\n") {
					t.Errorf("Check: %v; want one line naming %s with %q", err, home, tc.wantErr)
				}
			case err != nil:
				t.Errorf("Check: %v", err)
			case tc.wantWarn == "" && warn != "":
				t.Errorf("warning %q; want none", warn)
			case !strings.Contains(warn, tc.wantWarn):
				t.Errorf("warning %q; want %q", warn, tc.wantWarn)
			}
		})
	}
}

// A symbolic link in MQ_HOME is never followed: opening it fails and the
// file it names is untouched.
func TestOpenFileRefusesSymlink(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "cls.log")
	if err := os.Symlink(victim, link); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(link, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err == nil {
		f.Write([]byte("written through the link\n"))
		f.Close()
		t.Fatal("OpenFile followed a symbolic link")
	}
	if !strings.Contains(err.Error(), link+" is a symbolic link") {
		t.Errorf("error %q", err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
		t.Errorf("victim file is now %q", b)
	}
	if _, err := ReadFile(link); err == nil {
		t.Error("ReadFile followed a symbolic link")
	}
	if err := CheckEntry(link, 0); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("CheckEntry of a link: %v", err)
	}
}

func TestEntryChecks(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	loose := filepath.Join(dir, "loose")
	os.WriteFile(loose, nil, 0o600)
	mustChmod(t, loose, 0o666)
	if _, err := OpenFile(loose, os.O_RDONLY, 0); err == nil || !strings.Contains(err.Error(), "writable by others (mode 0666)") {
		t.Errorf("OpenFile of a 0666 file: %v", err)
	}
	sub := filepath.Join(dir, "output")
	if err := MkdirAll(sub); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(sub); fi.Mode().Perm() != 0o700 {
		t.Errorf("MkdirAll made mode %v", fi.Mode())
	}
	if err := CheckEntry(sub, 0); err == nil || !strings.Contains(err.Error(), "is a directory, not a regular file") {
		t.Errorf("CheckEntry of a directory as a file: %v", err)
	}
	link := filepath.Join(dir, "outlink")
	os.Symlink(sub, link)
	if err := MkdirAll(link); err == nil {
		t.Error("MkdirAll accepted a symbolic link")
	}
	if os.Geteuid() == 0 {
		foreign := filepath.Join(dir, "foreign")
		os.WriteFile(foreign, nil, 0o600)
		os.Chown(foreign, nobody, nobody)
		// The hint never says to remove it: the file may be the user's
		// database, left root's by a copy under sudo.
		if _, err := OpenFile(foreign, os.O_RDONLY, 0); err == nil || !strings.Contains(err.Error(), "owned by uid 65534") ||
			!strings.Contains(err.Error(), "sudo chown 0 "+foreign) || strings.Contains(err.Error(), "remove") {
			t.Errorf("OpenFile of another user's file: %v", err)
		}
	}
}

func mustChmod(t *testing.T, path string, m fs.FileMode) {
	t.Helper()
	if err := os.Chmod(path, m); err != nil {
		t.Fatal(err)
	}
}

// MQ_HOME given as a symbolic link is judged, and then used, by what it
// points to: the link's owner could repoint it after the check.
func TestCheckResolvesLinks(t *testing.T) {
	t.Parallel()
	top := t.TempDir()
	own := filepath.Join(top, "own")
	os.Mkdir(own, 0o700)
	open := filepath.Join(top, "open")
	os.Mkdir(open, 0o700)
	mustChmod(t, open, 0o777)
	toOwn, toOpen := filepath.Join(top, "to-own"), filepath.Join(top, "to-open")
	os.Symlink(own, toOwn)
	os.Symlink(open, toOpen)
	real, _, err := Check(toOwn)
	if wantReal, _ := filepath.EvalSymlinks(own); err != nil || real != wantReal {
		t.Errorf("Check(link to our own directory) = %q, %v; want %q", real, err, wantReal)
	}
	if _, _, err := Check(toOpen); err == nil || !strings.Contains(err.Error(), "writable by others (mode 0777)") {
		t.Errorf("Check(link to a world-writable directory) = %v; want refused", err)
	}
}

// TestCheckPrivate: a data root or output directory others can write, or
// rename away, is refused with one line naming it and the fix.
func TestCheckPrivate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name       string
		mode       fs.FileMode
		parentMode fs.FileMode // 0: 0700
		chown      bool        // owned by another user (root only)
		file       bool        // a file, not a directory
		wantErr    string
	}{
		{name: "private", mode: 0o700},
		{name: "readable", mode: 0o755},
		{name: "world-writable", mode: 0o777, wantErr: "is writable by others (mode 0777): they could replace its files; chmod 700"},
		{name: "group-writable", mode: 0o770, wantErr: "(mode 0770)"},
		{name: "sticky world-writable", mode: 0o777 | fs.ModeSticky, wantErr: "mode 1777"},
		{name: "parent writable", mode: 0o700, parentMode: 0o777, wantErr: "writable by others and not sticky (mode 0777)"},
		{name: "parent sticky", mode: 0o700, parentMode: 0o777 | fs.ModeSticky},
		{name: "foreign owner", mode: 0o777, chown: true, wantErr: "is owned by uid 65534, not by you"},
		{name: "a file", file: true, wantErr: "is not a directory"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if tc.chown && os.Geteuid() != 0 {
				t.Skip("needs root to give the directory to another user")
			}
			parent := filepath.Join(t.TempDir(), "p")
			dir := filepath.Join(parent, "data")
			if err := os.MkdirAll(parent, 0o700); err != nil {
				t.Fatal(err)
			}
			if tc.file {
				if err := os.WriteFile(dir, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			} else {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				mustChmod(t, dir, tc.mode)
			}
			pm := tc.parentMode
			if pm == 0 {
				pm = 0o700
			}
			mustChmod(t, parent, pm)
			if tc.chown {
				if err := os.Chown(dir, nobody, nobody); err != nil {
					t.Fatal(err)
				}
			}
			_, err := CheckPrivate("--data-root", dir)
			switch {
			case tc.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), "--data-root "+dir) || strings.Contains(err.Error(), "\n") {
					t.Errorf("CheckPrivate: %v; want one line naming --data-root %s with %q", err, dir, tc.wantErr)
				}
			case err != nil:
				t.Errorf("CheckPrivate: %v", err)
			}
		})
	}
}

// TestOpenFileTruncatesAfterChecks: O_TRUNC empties a file only once it
// passed the checks: a file OpenFile refuses is left whole.
func TestOpenFileTruncatesAfterChecks(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "shared")
	if err := os.WriteFile(path, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
	if f, err := OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600); err == nil {
		f.Close()
		t.Fatal("OpenFile took a file others can write")
	}
	if b, _ := os.ReadFile(path); string(b) != "keep" {
		t.Fatalf("a refused file was emptied: %q", b)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Fatalf("O_TRUNC of a file that passed: %q left", b)
	}
}

// TestCreateFile: CreateFile makes a new file 0600, empties one of the
// user's, and refuses one with another name (a hard link), a link, or a
// file others can write, leaving it whole.
func TestCreateFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	hard := filepath.Join(dir, "hard")
	if err := os.Link(victim, hard); err != nil {
		t.Skipf("no hard links here: %v", err)
	}
	sym := filepath.Join(dir, "sym")
	if err := os.Symlink(victim, sym); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{hard, sym} {
		if f, err := CreateFile(p, 0o600); err == nil {
			f.Close()
			t.Errorf("CreateFile(%s) took it", p)
		} else if p == hard && !strings.Contains(err.Error(), "2 names") {
			t.Errorf("CreateFile of a hard link: %v, want it to say the file has 2 names", err)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Fatalf("the file was emptied: %q", b)
	}
	fresh := filepath.Join(dir, "fresh")
	f, err := CreateFile(fresh, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("new file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	if err := os.Remove(hard); err != nil {
		t.Fatal(err)
	}
	if f, err = CreateFile(victim, 0o600); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if b, _ := os.ReadFile(victim); len(b) != 0 {
		t.Fatalf("CreateFile of the user's file of one name: %q left, want it emptied", b)
	}
}
