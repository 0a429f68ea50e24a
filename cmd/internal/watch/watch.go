// Package watch shows a command's view again every interval, as watch(1)
// does: mqstat --watch.
package watch

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/vbauerster/cupwriter"

	"github.com/mq-hpc/mq/protocol"
)

// Args turns "--watch INTERVAL" into "--watch --interval=INTERVAL"
// when the word after --watch is an interval: seconds up to maxSeconds
// (2, 0.5) or a Go duration (500ms, 1m). Anything else after --watch is
// left alone: mqstat --watch 501 watches job 501.
func Args(args []string) []string {
	out := make([]string, 0, len(args)+1)
	for i := 0; i < len(args); i++ {
		out = append(out, args[i])
		if args[i] == "--" {
			return append(out, args[i+1:]...)
		}
		if (args[i] == "--watch" || args[i] == "-watch") && i+1 < len(args) {
			if d, ok := interval(args[i+1]); ok {
				out = append(out, "--interval="+d.String())
				i++
			}
		}
	}
	return out
}

// maxSeconds bounds a bare number read as an interval: above it the
// number is more likely a job id (a longer interval has its unit: 15m).
const maxSeconds = 600

func interval(s string) (time.Duration, bool) {
	if d, err := time.ParseDuration(s); err == nil {
		return d, true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || f > maxSeconds {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// Loop shows view every interval until ctx ends, each view under header
// and the time: on a terminal (tty, out an *os.File) redrawn in place
// (cupwriter moves the cursor back over the last view; no escape codes of
// ours) and cut to the terminal's height, else one view after another.
// limit (0: none) bounds the lines view is asked for.
func Loop(ctx context.Context, out io.Writer, tty bool, every time.Duration, header string, limit int, view func(w io.Writer, limit int) error) error {
	var cw *cupwriter.Writer
	if f, ok := out.(*os.File); ok && tty {
		cw = cupwriter.New(f, false)
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		now := time.Now().Format("15:04:05")
		if cw != nil {
			_, height, err := cw.GetTermSize()
			if err != nil || height < 4 {
				height = 24
			}
			var buf bytes.Buffer
			fmt.Fprintf(&buf, "%s  %s\n", protocol.Printable(protocol.ClipText(header, 200)), now)
			n := height - 3
			if limit > 0 {
				n = min(n, limit)
			}
			if err := view(&buf, n); err != nil {
				return err
			}
			lines := strings.SplitAfter(buf.String(), "\n")
			if lines[len(lines)-1] == "" {
				lines = lines[:len(lines)-1]
			}
			if len(lines) > height-1 {
				lines = lines[:height-1]
			}
			for _, l := range lines {
				cw.WriteString(l)
			}
			if err := cw.Flush(len(lines)); err != nil {
				return err
			}
		} else {
			w := bufio.NewWriter(out)
			fmt.Fprintf(w, "%s  %s\n", header, now)
			if err := view(w, limit); err != nil {
				return err
			}
			fmt.Fprintln(w)
			if err := w.Flush(); err != nil {
				return err
			}
		}
		if ctx.Err() != nil {
			return nil // ended while the view was made: select may pick a tick that came meanwhile
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}
