package cls_test

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mq-hpc/mq/internal/cls"
)

// To a terminal (a person starting cls serve) the dashboard's address is
// printed with its token; anywhere else without it (the other case is in
// TestDashboardLoopbackNeedsToken).
func TestDashboardTokenOnTerminal(t *testing.T) {
	t.Parallel()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer ptm.Close()
	n, err := unix.IoctlGetInt(int(ptm.Fd()), unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(int(ptm.Fd()), unix.TIOCSPTLCK, 0)
	}
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	defer pts.Close()
	c := startCLS(t, cls.Config{Home: shortHome(t), Local: 0, HTTPAddr: "127.0.0.1:0", Notes: pts})
	u, err := cls.DashboardURL(c.Home())
	if err != nil {
		t.Fatal(err)
	}
	want := []byte("dashboard on " + u)
	var got []byte
	ptm.SetReadDeadline(time.Now().Add(time.Minute))
	buf := make([]byte, 4096)
	for !bytes.Contains(got, want) {
		k, err := ptm.Read(buf)
		got = append(got, buf[:k]...)
		if err != nil {
			t.Fatalf("the terminal shows %q, want %q: %v", got, want, err)
		}
	}
	if !strings.Contains(u, "?token=") {
		t.Errorf("DashboardURL %q has no token", u)
	}
}
