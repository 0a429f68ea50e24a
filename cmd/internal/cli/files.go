package cli

import (
	"fmt"
	"github.com/mq-hpc/mq/cmd/internal/acct"
	"strings"

	"github.com/mq-hpc/mq/protocol"
)

// Data staging's display (mqstat -j, mqstat --summary, cls files), shared
// by the commands. Callers escape the strings these return
// (protocol.Printable): they hold paths and names from peers.

// ShortSum shortens a hex SHA-256 for tables ("-" when unknown); --json
// has it whole.
func ShortSum(sum string) string {
	switch {
	case sum == "":
		return "-"
	case len(sum) > 12:
		return sum[:12]
	}
	return sum
}

// Replicas lists the places holding a file, as SITE or SITE:HOST ("none"
// when there are none).
func Replicas(rs []protocol.Replica) string {
	if len(rs) == 0 {
		return "none"
	}
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = r.Site
		if r.Host != "" {
			parts[i] += ":" + r.Host
		}
	}
	return strings.Join(parts, ", ")
}

// Rate is bytes over seconds, per second ("-" when no time was measured).
func Rate(bytes int64, seconds float64) string {
	if !(seconds > 0) {
		return "-"
	}
	return acct.HumanBytes(int64(float64(bytes)/seconds)) + "/s"
}

// TransferLine describes one transfer: FROM -> TO, bytes, time, rate, and
// why it failed, if it did.
func TransferLine(t protocol.TransferInfo) string {
	s := fmt.Sprintf("%s -> %s, %s in %.3g s (%s)", t.From, t.To, acct.HumanBytes(t.Bytes), t.Seconds, Rate(t.Bytes, t.Seconds))
	if t.Via != "" {
		s += ", via " + t.Via
	}
	if t.Error != "" {
		s += ", failed: " + t.Error
	}
	return s
}

// MovedLine sums the transfers made, for mqstat --summary.
func MovedLine(m protocol.MovedTotals) string {
	return fmt.Sprintf("moved: %d transfers, %s in %.3g s (%s), %d failed",
		m.Transfers, acct.HumanBytes(m.Bytes), m.Seconds, Rate(m.Bytes, m.Seconds), m.Failed)
}

// WasteLine sums what job replication's killed copies used (seed 000's
// CPU and network waste), for mqstat --summary.
func WasteLine(w protocol.WasteTotals) string {
	return fmt.Sprintf("replication waste: %d killed copies, %.3g CPU s, %.3g s held, %s staged for them",
		w.Killed, w.CPUSeconds, w.WallSeconds, acct.HumanBytes(w.Bytes))
}
