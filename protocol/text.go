package protocol

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on strings a placeholder supplies, checked where they arrive
// (register, report, output) so that a peer cannot fill the CLS's disk or
// forge what mqstat shows.
const (
	MaxHostBytes   = 256  // register: host
	MaxSiteBytes   = 256  // register: site
	MaxPathBytes   = 4096 // register: out_dir (PATH_MAX)
	MaxReasonBytes = 8192 // report: reason, output_lost
	MaxClientBytes = 256  // hello: client
)

// CheckText checks a string a peer supplied: at most max bytes, valid
// UTF-8, no control characters (C0, DEL, C1) nor other unprintable runes.
// The error names what the string is and quotes it, escaped.
func CheckText(what, s string, max int) error {
	if len(s) > max {
		return Errorf(CodeBadRequest, "%s is %d bytes; the limit is %d", what, len(s), max)
	}
	if !utf8.ValidString(s) {
		return Errorf(CodeBadRequest, "%s %s is not valid UTF-8", what, Quote(s))
	}
	for _, r := range s {
		if !printableRune(r) {
			return Errorf(CodeBadRequest, "%s %s has a control character", what, Quote(s))
		}
	}
	return nil
}

// printableRune is what Printable leaves alone: printable runes
// (unicode.IsPrint: no controls, no format characters such as bidi
// overrides) and the ASCII space.
func printableRune(r rune) bool {
	if r < utf8.RuneSelf {
		return r >= ' ' && r < 0x7f
	}
	return r != utf8.RuneError && unicode.IsPrint(r)
}

// Printable returns s fit for a terminal: control characters, other
// unprintable runes and bytes that are not UTF-8 become Go escapes (\n,
// \t, \x1b, \u0085, \u202e, \xe9); everything else, non-ASCII text
// included, is left alone. Every human-readable output of text that came
// from a peer or a user goes through it, so nothing can forge a row or
// send a terminal escape sequence.
func Printable(s string) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= ' ' && c < 0x7f {
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if (r == utf8.RuneError && n == 1) || !printableRune(r) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			b = fmt.Appendf(b, `\x%02x`, s[i])
		case printableRune(r):
			b = append(b, s[i:i+n]...)
		default:
			q := strconv.QuoteRuneToASCII(r) // '\n', '\x1b', '\u0085'
			b = append(b, q[1:len(q)-1]...)
		}
		i += n
	}
	return string(b)
}

// Quote is Printable in double quotes, for naming a string in a message.
func Quote(s string) string { return `"` + Printable(s) + `"` }

// ClipText makes s acceptable to CheckText with limit max: escaped by
// Printable and cut (at a rune) to at most max bytes. Placeholders pass
// their own reasons (a start error naming a path) through it.
func ClipText(s string, max int) string {
	s = Printable(s)
	if len(s) <= max {
		return s
	}
	const more = "..."
	cut := max - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// FormatBytes prints a byte count with a binary unit: 512 B, 1.5 MiB.
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// CleanReport makes a report acceptable whatever its agent put in it, so
// that one bad item never costs the batch it came in (the others' jobs
// would be lost with it, and the agent would stop): its reason and
// output_lost escaped and clipped (ClipText), usage no process can have
// dropped, and missing inputs that are no declared path (CheckPath; none
// can be) or past MaxFiles dropped. It says what it changed ("" when
// nothing), for the log.
func CleanReport(r *Report) string {
	var fixed []string
	if err := CheckText("reason", r.Reason, MaxReasonBytes); err != nil {
		r.Reason = ClipText(r.Reason, MaxReasonBytes)
		fixed = append(fixed, "reason")
	}
	if err := CheckText("output_lost", r.OutputLost, MaxReasonBytes); err != nil {
		r.OutputLost = ClipText(r.OutputLost, MaxReasonBytes)
		fixed = append(fixed, "output_lost")
	}
	if err := CheckUsage(r.Usage); err != nil {
		r.Usage = Usage{}
		fixed = append(fixed, "usage")
	}
	if k := len(r.Streamed); k > 0 {
		seen := map[string]bool{}
		r.Streamed = slices.DeleteFunc(r.Streamed, func(s Streamed) bool {
			bad := CheckStreamed(s) != nil || seen[s.Stream]
			seen[s.Stream] = true
			return bad
		})
		if len(r.Streamed) != k {
			fixed = append(fixed, fmt.Sprintf("%d streamed outputs", k-len(r.Streamed)))
		}
	}
	n := len(r.Missing)
	if n > MaxFiles {
		r.Missing = r.Missing[:MaxFiles]
	}
	r.Missing = slices.DeleteFunc(r.Missing, func(p string) bool {
		return CheckPath("missing input", p) != nil
	})
	if len(r.Missing) != n {
		fixed = append(fixed, fmt.Sprintf("%d missing inputs", n-len(r.Missing)))
	}
	return strings.Join(fixed, ", ")
}
