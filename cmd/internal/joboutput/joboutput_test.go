package joboutput

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestPrintNoFileYet: a running job whose output is in no file yet says
// so, pointing at --follow (mqstat --cat printed nothing and exited 0, as
// for a job that wrote nothing); an ended one with no file wrote nothing.
func TestPrintNoFileYet(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "1.out")
	for _, tc := range []struct {
		state string
		want  string // "" for no error
	}{
		{"E", "job 1 is running; its output is in no file yet (mqstat --cat 1 --follow shows it as it is written)"},
		{"D", ""},
	} {
		var out bytes.Buffer
		err := Print(&out, protocol.JobDetail{JobInfo: protocol.JobInfo{ID: 1, State: tc.state}, Stdout: missing}, false)
		if (tc.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tc.want) || out.Len() != 0 {
			t.Errorf("state %s: %v, printed %q; want %q", tc.state, err, out.String(), tc.want)
		}
	}
}
