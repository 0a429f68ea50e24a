package job

import (
	"fmt"
	"path/filepath"
	"unicode"
	"unicode/utf8"
)

// MaxCommandBytes is the longest command line accepted. Linux refuses a
// single exec argument of 128 KiB or more with its terminating NUL
// (MAX_ARG_STRLEN), and jobs run as `/bin/sh -c COMMAND`, so a longer one
// could never start.
const MaxCommandBytes = 128<<10 - 1

// MaxNameBytes bounds queue and target names.
const MaxNameBytes = 256

// OutputPaths names the files a placeholder writes a job attempt's stdout and
// stderr to under its output directory. Both the placeholder and the CLS
// derive them, so the metaqueue stores the directory once per placeholder,
// not two paths per job. Jobs are sharded 1,000 to a directory.
func OutputPaths(dir string, id int64, attempt int) (stdout, stderr string) {
	d := filepath.Join(dir, fmt.Sprintf("%d", id/1000))
	base := fmt.Sprintf("%d.%d", id, attempt)
	return filepath.Join(d, base+".out"), filepath.Join(d, base+".err")
}

// ValidName checks a queue or target name: printable, no spaces or commas
// (commas separate prerequisite lists), bounded.
func ValidName(kind, s string) error {
	if s == "" {
		return fmt.Errorf("empty %s name", kind)
	}
	if len(s) > MaxNameBytes {
		return fmt.Errorf("%s name is %d bytes; the limit is %d", kind, len(s), MaxNameBytes)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			return validUnicodeName(kind, s)
		}
		if c <= ' ' || c == ',' || c == 0x7f {
			return fmt.Errorf("%s name %q has a space, comma or control character", kind, s)
		}
	}
	return nil
}

// ValidNewName is ValidName for a name a submission may create (a job's
// target and prerequisite targets): it must not begin with '-'. Such a
// name is nearly always a flag that took the next one as its value
// (mqsub -p -t x cmd: prerequisite "-t", target "x"), and commands would
// read it as a flag after. Names stored before stay usable.
func ValidNewName(kind, s string) error {
	if err := ValidName(kind, s); err != nil {
		return err
	}
	if s[0] == '-' {
		return fmt.Errorf("%s name %q begins with '-': was a flag given without its value?", kind, s)
	}
	return nil
}

// validUnicodeName is ValidName's check for a name that is not all ASCII
// (kept off the bulk path's common case): valid UTF-8, printable.
func validUnicodeName(kind, s string) error {
	if !utf8.ValidString(s) {
		return fmt.Errorf("%s name %q is not valid UTF-8", kind, s)
	}
	for _, r := range s {
		if r <= ' ' || r == ',' || r == 0x7f || !unicode.IsPrint(r) {
			return fmt.Errorf("%s name %q has a space, comma or control character", kind, s)
		}
	}
	return nil
}
