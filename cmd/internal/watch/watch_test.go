package watch

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestWatchArgs(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want []string }{
		{[]string{"mqstat", "--watch"}, []string{"mqstat", "--watch"}},
		{[]string{"mqstat", "--watch", "5", "-s", "E"}, []string{"mqstat", "--watch", "--interval=5s", "-s", "E"}},
		{[]string{"mqstat", "--watch", "500ms"}, []string{"mqstat", "--watch", "--interval=500ms"}},
		{[]string{"mqstat", "--watch", "-s", "E"}, []string{"mqstat", "--watch", "-s", "E"}},
		{[]string{"mqstat", "--", "--watch", "5"}, []string{"mqstat", "--", "--watch", "5"}},
		{[]string{"mqstat", "--watch", "600"}, []string{"mqstat", "--watch", "--interval=10m0s"}},
		{[]string{"mqstat", "--watch", "501s"}, []string{"mqstat", "--watch", "--interval=8m21s"}},
		// A bare number above ten minutes is a job id.
		{[]string{"mqstat", "--watch", "601"}, []string{"mqstat", "--watch", "601"}},
		{[]string{"mqstat", "--watch", "1000001"}, []string{"mqstat", "--watch", "1000001"}},
	} {
		if got := Args(c.in); !slices.Equal(got, c.want) {
			t.Errorf("Args(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	if d, ok := interval("0.5"); !ok || d != 500*time.Millisecond {
		t.Errorf("interval(0.5) = %v, %v", d, ok)
	}
}

// TestLoopPlain: off a terminal each view follows the last under the
// header and the time, asked for limit lines, until ctx ends.
func TestLoopPlain(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out bytes.Buffer
	n := 0
	err := Loop(ctx, &out, false, time.Millisecond, "every 1ms", 7, func(w io.Writer, limit int) error {
		n++
		fmt.Fprintf(w, "view %d limit %d\n", n, limit)
		if n == 2 {
			cancel()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	views := strings.Split(strings.TrimSuffix(out.String(), "\n\n"), "\n\n")
	if len(views) != 2 {
		t.Fatalf("%d views, want 2:\n%s", len(views), out.String())
	}
	for i, v := range views {
		head, body, _ := strings.Cut(v, "\n")
		if !strings.HasPrefix(head, "every 1ms  ") || body != fmt.Sprintf("view %d limit 7", i+1) {
			t.Errorf("view %d: %q", i+1, v)
		}
	}
}

// FuzzArgs: no argument list makes Args panic, and Args changes only
// the word after a --watch, into an --interval: every other argument is
// kept, in its place.
func FuzzArgs(f *testing.F) {
	for _, s := range []string{"--watch 5", "--watch NaN", "--watch -1s", "--watch 601", "--watch -- --watch 2", "-watch 1e308", "--watch"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in := strings.Split(s, " ")
		out := Args(in)
		if len(out) != len(in) {
			t.Fatalf("Args(%q) = %q", in, out)
		}
		for i := range in {
			if out[i] != in[i] && !(i > 0 && strings.HasPrefix(out[i], "--interval=") && strings.TrimLeft(in[i-1], "-") == "watch") {
				t.Fatalf("Args(%q) = %q: argument %d changed", in, out, i)
			}
		}
	})
}
