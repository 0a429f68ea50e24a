package placeholder

import (
	"strings"
	"testing"

	"github.com/mq-hpc/mq/protocol"
)

// TestOutputLimitQueueCap: an attempt's cap is the smaller of the agent's
// (DefaultMaxOutput for 0, none when negative) and its queue's; a queue
// cap out of bounds is none; the reason names whose cap was passed.
func TestOutputLimitQueueCap(t *testing.T) {
	for _, tc := range []struct {
		name        string
		agent, q    int64
		want        int64
		reasonNames string
	}{
		{"default agent, no queue cap", 0, 0, DefaultMaxOutput, "cls serve --max-output"},
		{"queue below the default", 0, 1 << 20, 1 << 20, "queue q's --max-output"},
		{"queue above the agent's", 100, 200, 100, "cls serve --max-output"},
		{"queue below the agent's", 100, 50, 50, "queue q's --max-output"},
		{"agent without cap", -1, 50, 50, "queue q's --max-output"},
		{"neither", -1, 0, -1, ""},
		{"queue cap out of bounds", 100, protocol.MaxQueueOutput + 1, 100, "cls serve --max-output"},
		{"negative queue cap", 100, -5, 100, "cls serve --max-output"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := New(Config{Site: "s", Host: "h", MaxOutput: tc.agent})
			l := a.newOutputLimit(t.TempDir(), protocol.Assignment{Queue: "q", MaxOutput: tc.q})
			if l.max != tc.want {
				t.Fatalf("cap %d, want %d", l.max, tc.want)
			}
			if tc.want < 0 {
				if n := l.take(1 << 30); n != 1<<30 || l.why() != "" {
					t.Errorf("no cap: took %d, reason %q", n, l.why())
				}
				return
			}
			if n := l.take(int(tc.want) + 1); int64(n) != tc.want {
				t.Errorf("took %d of %d, want %d", n, tc.want+1, tc.want)
			}
			if why := l.why(); !strings.Contains(why, tc.reasonNames) {
				t.Errorf("reason %q does not name %q", why, tc.reasonNames)
			}
		})
	}
}
