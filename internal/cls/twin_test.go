package cls_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/internal/cls"
)

// A dashboard on one loopback also holds the other on its port: a browser
// or proxy that asks for localhost:PORT (jupyter-server-proxy's
// /proxy/PORT/) may reach ::1 first, and any user of the machine could
// otherwise listen there and be sent the owner's token and session
// cookie. It answers there as on the address given; a twin already taken
// refuses the start, naming it.
func TestDashboardHoldsBothLoopbacks(t *testing.T) {
	t.Parallel()
	probe, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback here: %v", err)
	}
	probe.Close()
	for _, tc := range []struct{ addr, twin string }{
		{"127.0.0.1:0", "::1"},
		{"[::1]:0", "127.0.0.1"},
		{"localhost:0", ""}, // the one of the two it did not bind
		{":0", "::1"},
	} {
		c := startCLS(t, cls.Config{HTTPAddr: tc.addr})
		host, port, _ := net.SplitHostPort(c.HTTPAddr().String())
		twin := tc.twin
		if twin == "" {
			twin = map[string]string{"127.0.0.1": "::1", "::1": "127.0.0.1"}[host]
		}
		at := net.JoinHostPort(twin, port)
		if ln, err := net.Listen("tcp", at); err == nil {
			ln.Close()
			t.Errorf("--http %s: %s was free for anyone to listen on while the dashboard was on %s", tc.addr, at, c.HTTPAddr())
			continue
		}
		tok, err := os.ReadFile(filepath.Join(c.Home(), cls.TokenFileName))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest("GET", "http://"+at+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("--http %s: the dashboard at %s: %v", tc.addr, at, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("--http %s: the dashboard at %s answered %d", tc.addr, at, resp.StatusCode)
		}
	}

	squat, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Fatal(err)
	}
	defer squat.Close()
	_, port, _ := net.SplitHostPort(squat.Addr().String())
	c, err := cls.New(context.Background(), cls.Config{Home: shortHome(t), HTTPAddr: "127.0.0.1:" + port})
	if err == nil {
		c.Close()
		t.Fatalf("--http 127.0.0.1:%s started with [::1]:%s another's", port, port)
	}
	if !strings.Contains(err.Error(), "[::1]:"+port) {
		t.Errorf("--http 127.0.0.1:%s with [::1]:%s taken: %v; want the twin named", port, port, err)
	}
}
