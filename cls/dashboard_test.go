package cls_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/cls"
)

func TestHTTPAddrChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		addr   string
		public bool
		want   string // "" = starts
	}{
		{"127.0.0.1:0", false, ""},
		{"localhost:0", false, ""},
		{"0.0.0.0:0", false, "not a loopback address"},
		{":0", false, ""}, // loopback by default
		{"[::]:0", false, "not a loopback address"},
		{"nonsense", false, "not HOST:PORT"},
	} {
		c, err := cls.New(context.Background(), cls.Config{Home: shortHome(t), HTTPAddr: tc.addr, HTTPPublic: tc.public})
		if tc.want == "" {
			if err != nil {
				t.Errorf("%s: %v", tc.addr, err)
				continue
			}
			if c.HTTPAddr() == nil {
				t.Errorf("%s: no dashboard address", tc.addr)
			}
			c.Close()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.addr, err, tc.want)
			if c != nil {
				c.Close()
			}
		}
	}
}

// A public dashboard makes its token file 0600 once and keeps it; one
// others can read is refused.
func TestHTTPToken(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	c, err := cls.New(context.Background(), cls.Config{Home: home, HTTPAddr: "0.0.0.0:0", HTTPPublic: true})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	path := filepath.Join(home, cls.TokenFileName)
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token %v %v", fi, err)
	}
	tok, _ := os.ReadFile(path)
	os.Chmod(path, 0o644)
	if _, err := cls.New(context.Background(), cls.Config{Home: home, HTTPAddr: "0.0.0.0:0", HTTPPublic: true}); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Errorf("a token others can read: %v", err)
	}
	os.Chmod(path, 0o600)
	c = startCLS(t, cls.Config{Home: home, HTTPAddr: "0.0.0.0:0", HTTPPublic: true})
	url := "http://" + c.HTTPAddr().String() + "/metrics"
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("no token: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("with the token: %v %v", resp, err)
	}
	resp.Body.Close()
}

// --log-format json writes one JSON object a line; ReopenLog (SIGHUP)
// writes to a new cls.log after the old one was moved away.
func TestLogJSONAndReopen(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	c := startCLS(t, cls.Config{Home: home, LogFormat: "json"})
	log := filepath.Join(c.Home(), "cls.log")
	if err := os.Rename(log, log+".1"); err != nil {
		t.Fatal(err)
	}
	if err := c.ReopenLog(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{log + ".1", log} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for _, l := range lines {
			if l == "" {
				continue // the old file may have nothing yet
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil || m["msg"] == nil {
				t.Errorf("%s: %q is not a JSON log line: %v", p, l, err)
			}
		}
		if p == log && !strings.Contains(string(b), "log reopened") {
			t.Errorf("the new log has %q", b)
		}
	}
	if _, err := cls.New(context.Background(), cls.Config{Home: shortHome(t), LogFormat: "xml"}); err == nil {
		t.Error("log format xml accepted")
	}
}
