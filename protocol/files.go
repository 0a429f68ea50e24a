package protocol

import (
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxFiles is the most inputs (and, separately, outputs) one job may declare.
const MaxFiles = 10000

// maxPath is the longest file path accepted (Linux's PATH_MAX).
const maxPath = 4096

// validateFiles checks a job's declared files, resolving relative paths
// against cwd and cleaning them, so equal files compare equal.
func validateFiles(kind string, files []File, cwd string) error {
	if len(files) > MaxFiles {
		return fmt.Errorf("%d %ss; the limit is %d", len(files), kind, MaxFiles)
	}
	seen := make(map[string]bool, len(files))
	for i := range files {
		f := &files[i]
		if f.Path == "" {
			return fmt.Errorf("%s %d has an empty path", kind, i+1)
		}
		if len(f.Path) > maxPath {
			return fmt.Errorf("%s %d: path is %d bytes; the limit is %d", kind, i+1, len(f.Path), maxPath)
		}
		if err := CheckPath(kind, f.Path); err != nil {
			return err
		}
		// Cleaning would make "results/" a file's name; mq moves files.
		if last := f.Path[strings.LastIndexByte(f.Path, '/')+1:]; last == "" || last == "." || last == ".." {
			return fmt.Errorf("%s %s names a directory: declare the files in it (or an archive of it)", kind, Quote(f.Path))
		}
		if !filepath.IsAbs(f.Path) {
			if cwd == "" {
				return fmt.Errorf("%s %q is not absolute and the job has no working directory", kind, f.Path)
			}
			f.Path = filepath.Join(cwd, f.Path)
			f.Rel = true
		}
		f.Path = filepath.Clean(f.Path)
		if len(f.Path) > maxPath {
			return fmt.Errorf("%s %d: path is %d bytes with the working directory; the limit is %d", kind, i+1, len(f.Path), maxPath)
		}
		if f.Size != nil && *f.Size < 0 {
			return fmt.Errorf("%s %q: size %d is negative", kind, f.Path, *f.Size)
		}
		if seen[f.Path] {
			return fmt.Errorf("%s %q is listed twice", kind, f.Path)
		}
		seen[f.Path] = true
	}
	return nil
}

// CheckPath is the rule every declared file path follows (a job's inputs
// and outputs, from mqsub, job files, bulk adds and the driver; the
// catalog's files.* ops): at most PATH_MAX bytes of valid UTF-8 without
// NUL, control characters (C0, DEL, C1) or other unprintable runes (bidi
// overrides). Such a path is a mistake or an attack: it would reach
// agents' reports, logs and terminals, where a peer's text must pass
// CheckText. The error quotes the path escaped, on one line; what names
// the path ("input").
func CheckPath(what, p string) error {
	switch {
	case p == "":
		return fmt.Errorf("%s: empty path", what)
	case len(p) > maxPath:
		if !strings.HasSuffix(what, "path") {
			what += " path" // "input path", but not "path path"
		}
		return fmt.Errorf("%s is %d bytes; the limit is %d", what, len(p), maxPath)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("%s %s contains a NUL byte", what, Quote(p))
	case !utf8.ValidString(p):
		return fmt.Errorf("%s %s is not valid UTF-8 (mq cannot carry such a path exactly)", what, Quote(p))
	}
	for _, r := range p {
		if !printableRune(r) {
			return fmt.Errorf("%s %s has a control character; rename the file (mq refuses control characters in paths)", what, Quote(p))
		}
	}
	return nil
}

// ParseSize reads a byte count: digits with an optional unit K, M, G or T
// (powers of 1024; a trailing B or iB is allowed), e.g. 512, 10M, 1.5GiB.
func ParseSize(s string) (int64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	t = strings.TrimSuffix(t, "IB")
	t = strings.TrimSuffix(t, "B")
	mult := 1.0
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'K':
			mult = 1 << 10
		case 'M':
			mult = 1 << 20
		case 'G':
			mult = 1 << 30
		case 'T':
			mult = 1 << 40
		}
		if mult > 1 {
			t = t[:n-1]
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || t == "" || strings.ContainsAny(t, "eEnNxX+") || v < 0 || math.IsInf(v*mult, 0) || v*mult >= 1<<62 {
		return 0, fmt.Errorf("%q is not a size (e.g. 512, 10M, 2G)", s)
	}
	return int64(v * mult), nil
}

// ParseFileArg reads mqsub's --in/--out PATH[:SIZE]. Colons belong to the
// path except before a size: only a last ":SIZE" whose SIZE is written as
// a size (digits, a fraction, a unit: "10M", "1.5GiB") is split off, so
// "a:b.log", "sample:1.fastq" and "chr1:100-200.bed" are paths. exists,
// if not nil, says whether a name (as given, relative to the job's
// directory) is a file there: an argument that names an existing file is
// that file, whatever its end reads as ("img:10K" there is img:10K); to
// give a size to a file whose name ends like one, add it ("img:10K:2M").
// An argument that is no existing file while what precedes its last
// colon is one, and whose end is a number with a unit that is none
// ("db.fa:10X"), is refused as a mistyped size.
func ParseFileArg(s string, exists func(name string) bool) (File, error) {
	if s == "" {
		return File{}, fmt.Errorf("empty file argument")
	}
	if exists != nil && exists(s) {
		return File{Path: s}, nil
	}
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return File{Path: s}, nil
	}
	suffix := s[i+1:]
	n, isSize, err := parseSizeSuffix(suffix)
	switch {
	case err != nil:
		return File{}, fmt.Errorf("%s: %v", s, err)
	case !isSize && exists != nil && i > 0 && sizeTypo.MatchString(suffix) && exists(s[:i]):
		return File{}, fmt.Errorf("%s: no file of that name, and %q is not a size (e.g. 512, 10M, 2G)", s, suffix)
	case !isSize:
		return File{Path: s}, nil
	case i == 0:
		return File{}, fmt.Errorf("%q has a size but no path", s)
	}
	return File{Path: s[:i], Size: &n}, nil
}

// parseSizeSuffix is ParseSize for what follows a path's last colon: only
// text written as a size (digits, a fraction, a unit K, M, G or T, a B or
// iB) is one; such text that is no size (too big) is an error.
func parseSizeSuffix(s string) (n int64, isSize bool, err error) {
	if !sizeSyntax.MatchString(s) {
		return 0, false, nil
	}
	n, err = ParseSize(s)
	return n, true, err
}

// sizeSyntax is how a size is written; sizeTypo is a number with letters
// after it, as a size with a mistyped unit reads ("10X", "1.5Q"; "1.log"
// is not one).
var (
	sizeSyntax = regexp.MustCompile(`^([0-9]+(\.[0-9]*)?|\.[0-9]+)([KkMmGgTt]?([Ii]?[Bb])?)$`)
	sizeTypo   = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?[A-Za-z]{1,3}$`)
)

// FillSizes sets the size of every input that declares none to the size of
// the regular file at its path, if stat finds one, and records the file's
// modification time (MTime): the catalog notices a file changed after
// submission by both. A declared size is kept for files that are not
// there (yet); one that is there has its real size. Call it after
// ValidateSpec (paths are absolute then), on the host the paths name. An
// input that is a directory there is an error: a job's inputs are files
// (its placeholder refuses to start it on anything else).
func FillSizes(js *JobSpec, stat func(string) (fs.FileInfo, error)) error {
	for i := range js.Inputs {
		f := &js.Inputs[i]
		fi, err := stat(f.Path)
		switch {
		case err != nil:
		case fi.IsDir():
			return fmt.Errorf("input %s is a directory: declare the files in it (--in DIR/FILE), or an archive of it", Quote(f.Path))
		case fi.Mode().IsRegular():
			n := fi.Size()
			f.Size = &n
			f.MTime = fi.ModTime().UnixNano()
		}
	}
	return nil
}
