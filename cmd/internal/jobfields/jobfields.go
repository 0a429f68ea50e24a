// Package jobfields is mqstat's --format: the listing's jobs as lines of
// chosen fields, for scripts, as sacct --format and squeue -O print them.
// A line holds the fields' values separated by tabs, in the order asked,
// "-" for an empty value; no value holds a tab or a newline (each is
// escaped as the table escapes it), so a line splits on tabs the same
// whatever the jobs.
package jobfields

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/mq-hpc/mq/protocol"
)

// Field is one column of --format.
type Field struct {
	Name  string
	value func(j protocol.JobInfo, now time.Time) string
}

// fields are the known ones, in the order the error lists them.
var fields = []Field{
	{"id", func(j protocol.JobInfo, _ time.Time) string { return strconv.FormatInt(j.ID, 10) }},
	{"state", func(j protocol.JobInfo, _ time.Time) string { return j.State }},
	{"target", func(j protocol.JobInfo, _ time.Time) string { return j.Target }},
	{"queue", func(j protocol.JobInfo, _ time.Time) string { return j.Queue }},
	{"exit", func(j protocol.JobInfo, _ time.Time) string {
		if j.Exit == nil {
			return ""
		}
		return strconv.Itoa(*j.Exit)
	}},
	{"host", func(j protocol.JobInfo, _ time.Time) string { return j.Host }},
	{"site", func(j protocol.JobInfo, _ time.Time) string { return j.Site }},
	{"where", func(j protocol.JobInfo, _ time.Time) string { return Where(j.Site, j.Host) }},
	{"submitted", func(j protocol.JobInfo, _ time.Time) string { return j.Submitted }},
	{"started", func(j protocol.JobInfo, _ time.Time) string { return j.Started }},
	{"ended", func(j protocol.JobInfo, _ time.Time) string { return j.Finished }},
	{"elapsed", elapsed},
	{"attempts", func(j protocol.JobInfo, _ time.Time) string { return strconv.Itoa(j.Attempts) }},
	{"priority", func(j protocol.JobInfo, _ time.Time) string { return strconv.Itoa(j.Priority) }},
	{"prereqs", func(j protocol.JobInfo, _ time.Time) string { return strings.Join(j.Prereqs, ",") }},
	{"command", func(j protocol.JobInfo, _ time.Time) string {
		return strings.ReplaceAll(protocol.CommandOf(j.Command, j.CommandBytes), "\n", " ")
	}},
	{"cwd", func(j protocol.JobInfo, _ time.Time) string { return j.Cwd }},
	{"reason", func(j protocol.JobInfo, _ time.Time) string { return j.Reason }},
}

// Names lists the known fields, comma-separated.
func Names() string {
	names := make([]string, len(fields))
	for i, f := range fields {
		names[i] = f.Name
	}
	return strings.Join(names, ",")
}

// Parse reads a comma-separated list of field names (any case, "ended"
// also as "finished" and "end", as the table's FINISHED column).
func Parse(list string) ([]Field, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("no fields (known: " + Names() + ")")
	}
	var out []Field
	for _, name := range strings.Split(list, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		switch name {
		case "finished", "end":
			name = "ended"
		case "jobid":
			name = "id"
		}
		f, ok := lookup(name)
		if !ok {
			return nil, fmt.Errorf("unknown field %q (known: %s)", protocol.ClipText(protocol.Printable(name), 40), Names())
		}
		out = append(out, f)
	}
	return out, nil
}

func lookup(name string) (Field, bool) {
	for _, f := range fields {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}

// Header is the line naming fs, upper-cased as the table's header.
func Header(fs []Field) string {
	names := make([]string, len(fs))
	for i, f := range fs {
		names[i] = strings.ToUpper(f.Name)
	}
	return strings.Join(names, "\t") + "\n"
}

// Row is job j's line of fs; now is when the listing was asked for (a
// running job's elapsed time).
func Row(fs []Field, j protocol.JobInfo, now time.Time) string {
	var b strings.Builder
	for i, f := range fs {
		if i > 0 {
			b.WriteByte('\t')
		}
		v := protocol.Printable(f.value(j, now))
		if v == "" {
			v = "-"
		}
		b.WriteString(v)
	}
	b.WriteByte('\n')
	return b.String()
}

// Where is where a job ran or runs, as the table's HOST column shows it:
// the host at the site local (the CLS's own machine), SITE/HOST at any
// other site, where the host alone may name a machine of another cluster
// or the same one seen through a batch system ("" when neither is known).
func Where(site, host string) string {
	switch {
	case site == "" || site == "local":
		return host
	case host == "":
		return site
	}
	return site + "/" + host
}

// elapsed is the seconds the job's latest attempt took, or has taken so
// far while it runs.
func elapsed(j protocol.JobInfo, now time.Time) string {
	e := j.Elapsed
	if e == 0 && j.Started != "" && j.Finished == "" {
		t, err := time.Parse(time.RFC3339Nano, j.Started)
		if err != nil {
			return ""
		}
		e = max(now.Sub(t).Seconds(), 0)
	}
	if e == 0 && j.Started == "" {
		return ""
	}
	return strconv.FormatFloat(math.Round(e*10)/10, 'f', -1, 64)
}
