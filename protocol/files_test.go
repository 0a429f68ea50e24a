package protocol

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func size(n int64) *int64 { return &n }

func TestValidateFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		cwd     string
		in, out []File
		errHas  string
		want    []string // inputs' paths after validation
	}{
		{"absolute", "/w", []File{{Path: "/data/a", Size: size(10)}}, nil, "", []string{"/data/a"}},
		{"relative resolved against cwd", "/w", []File{{Path: "sub/../a"}}, nil, "", []string{"/w/a"}},
		{"cleaned", "", []File{{Path: "/data//x/./y"}}, nil, "", []string{"/data/x/y"}},
		{"relative without cwd", "", []File{{Path: "a"}}, nil, "not absolute", nil},
		{"empty path", "/w", []File{{Path: ""}}, nil, "input 1 has an empty path", nil},
		{"negative size", "/w", nil, []File{{Path: "/o", Size: size(-1)}}, "size -1 is negative", nil},
		{"twice", "/w", []File{{Path: "/a"}, {Path: "a", Size: size(1)}}, nil, "", []string{"/a", "/w/a"}},
		{"twice after resolving", "/", []File{{Path: "/a"}, {Path: "a"}}, nil, `input "/a" is listed twice`, nil},
		{"NUL", "/w", []File{{Path: "/a\x00b"}}, nil, "NUL", nil},
		{"newline stays quoted", "/w", nil, []File{{Path: "/a\nb", Size: size(-5)}}, `"/a\nb"`, nil},
		{"escape sequence", "/w", []File{{Path: "a\nb\u001b[31m"}}, nil, `input "a\nb\x1b[31m" has a control character`, nil},
		{"tab", "/w", []File{{Path: "/a\tb"}}, nil, "control character", nil},
		{"DEL", "/w", nil, []File{{Path: "/a\x7f"}}, "control character", nil},
		{"C1", "/w", []File{{Path: "/a\u0085b"}}, nil, "control character", nil},
		{"bidi override", "/w", []File{{Path: "/a\u202eb"}}, nil, "control character", nil},
		{"not UTF-8", "/w", []File{{Path: "/a\xffb"}}, nil, "not valid UTF-8", nil},
		{"space and non-ASCII fine", "/w", []File{{Path: "/d/ü b.txt"}}, nil, "", []string{"/d/ü b.txt"}},
		{"too long", "/w", []File{{Path: "/" + strings.Repeat("x", 5000)}}, nil, "the limit is 4096", nil},
		{"too long with the working directory", "/" + strings.Repeat("w", 100), []File{{Path: strings.Repeat("x", 4050)}}, nil, "with the working directory", nil},
		{"too many", "/w", make([]File, MaxFiles+1), nil, "the limit is 10000", nil},
		{"the root", "/w", nil, []File{{Path: "/"}}, `output "/" names a directory`, nil},
		{"a trailing slash", "/w", nil, []File{{Path: "results/"}}, `output "results/" names a directory`, nil},
		{"dot", "/w", []File{{Path: "."}}, nil, `input "." names a directory`, nil},
		{"dot dot", "/w", []File{{Path: "/data/x/.."}}, nil, "names a directory", nil},
		{"a dot in a name", "/w", []File{{Path: "./a..b/.c"}}, nil, "", []string{"/w/a..b/.c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			js := JobSpec{Target: "t", Command: "x", Cwd: tc.cwd, Inputs: tc.in, Outputs: tc.out}
			err := ValidateSpec(&js)
			if tc.errHas != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) || strings.ContainsAny(err.Error(), "\n\x00\x1b") {
					t.Fatalf("error %v, want one line containing %q", err, tc.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range js.Inputs {
				got = append(got, f.Path)
			}
			if strings.Join(got, " ") != strings.Join(tc.want, " ") {
				t.Fatalf("inputs %v, want %v", got, tc.want)
			}
			// Validation is idempotent (the server validates again).
			if err := ValidateSpec(&js); err != nil {
				t.Fatalf("second validation: %v", err)
			}
		})
	}
}

func TestParseSizeAndFileArg(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]int64{"0": 0, "512": 512, "10K": 10 << 10, "10M": 10 << 20, "1.5G": 3 << 29,
		"2GiB": 2 << 30, "3mb": 3 << 20, "1T": 1 << 40, "7B": 7} {
		if got, err := ParseSize(in); err != nil || got != want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "M", "-1", "1e3", "NaN", "inf", "0x10", "10X", "99999999999T"} {
		if n, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) = %d, want an error", bad, n)
		}
	}
	have := map[string]bool{"img:10K": true, "db.fa": true, "b": true}
	exists := func(name string) bool { return have[name] }
	for _, tc := range []struct {
		in     string
		exists func(string) bool
		want   File
	}{
		{"/d/a", nil, File{Path: "/d/a"}},
		{"/d/a:10M", nil, File{Path: "/d/a", Size: size(10 << 20)}},
		{"rel:0", nil, File{Path: "rel", Size: size(0)}},
		{"/d/a:b", nil, File{Path: "/d/a:b"}},
		{"/d/a:1:2K", nil, File{Path: "/d/a:1", Size: size(2048)}},
		{"a:b.log", nil, File{Path: "a:b.log"}},
		{"sample:1.fastq", nil, File{Path: "sample:1.fastq"}},
		{"chr1:100-200.bed", nil, File{Path: "chr1:100-200.bed"}},
		{"a:b.log:0", nil, File{Path: "a:b.log", Size: size(0)}},
		{"a:", nil, File{Path: "a:"}},
		{"a:-1", nil, File{Path: "a:-1"}},
		{"a:1e3", nil, File{Path: "a:1e3"}},
		{"a:10 ", nil, File{Path: "a:10 "}},
		{"img:10K", nil, File{Path: "img", Size: size(10 << 10)}},
		{"img:10K", exists, File{Path: "img:10K"}}, // an existing file wins
		{"img:10K:2M", exists, File{Path: "img:10K", Size: size(2 << 20)}},
		{"db.fa:5M", exists, File{Path: "db.fa", Size: size(5 << 20)}},
		{"b:1.log", exists, File{Path: "b:1.log"}}, // not a size: a name, though b exists
		{"c:10X", exists, File{Path: "c:10X"}},
		{"db.fa:1.5.3", exists, File{Path: "db.fa:1.5.3"}},
	} {
		got, err := ParseFileArg(tc.in, tc.exists)
		want := tc.want
		if err != nil || got.Path != want.Path || (got.Size == nil) != (want.Size == nil) || (got.Size != nil && *got.Size != *want.Size) {
			t.Errorf("ParseFileArg(%q) = %+v, %v; want %+v", tc.in, got, err, want)
		}
	}
	for _, bad := range []string{"", ":10M", "db.fa:10X", "db.fa:1.5Q", "db.fa:10GX", "x:99999999T", "x:99999999999999999999"} {
		if f, err := ParseFileArg(bad, exists); err == nil {
			t.Errorf("ParseFileArg(%q) = %+v: no error", bad, f)
		}
	}
}

func TestFillSizes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, 1234), 0o600); err != nil {
		t.Fatal(err)
	}
	js := JobSpec{Target: "t", Command: "x", Cwd: dir,
		Inputs:  []File{{Path: "f"}, {Path: "missing"}, {Path: "/dev/null"}, {Path: "f2", Size: size(5)}},
		Outputs: []File{{Path: "f"}}}
	if err := ValidateSpec(&js); err != nil {
		t.Fatal(err)
	}
	if err := FillSizes(&js, func(p string) (fs.FileInfo, error) { return os.Stat(p) }); err != nil {
		t.Fatal(err)
	}
	if js.Inputs[0].Size == nil || *js.Inputs[0].Size != 1234 {
		t.Errorf("existing input: size %v, want 1234", js.Inputs[0].Size)
	}
	if js.Inputs[1].Size != nil || js.Inputs[2].Size != nil {
		t.Errorf("a missing file or a device got a size")
	}
	if *js.Inputs[3].Size != 5 {
		t.Errorf("a declared size was replaced")
	}
	if js.Outputs[0].Size != nil {
		t.Errorf("an output got a size from stat")
	}
	if js.Inputs[0].MTime == 0 || js.Inputs[1].MTime != 0 || !js.Inputs[0].Rel {
		t.Errorf("existing input: mtime %d, rel %v; missing: mtime %d", js.Inputs[0].MTime, js.Inputs[0].Rel, js.Inputs[1].MTime)
	}
	abs := JobSpec{Target: "t", Command: "x", Cwd: dir, Inputs: []File{{Path: filepath.Join(dir, "f"), Size: size(1)}}}
	if err := ValidateSpec(&abs); err != nil {
		t.Fatal(err)
	}
	if err := FillSizes(&abs, os.Stat); err != nil {
		t.Fatal(err)
	}
	if abs.Inputs[0].Rel || *abs.Inputs[0].Size != 1234 {
		t.Errorf("absolute existing input: %+v (want site-local, its real size)", abs.Inputs[0])
	}
	// A directory is refused: no placeholder would start the job on it.
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o700); err != nil {
		t.Fatal(err)
	}
	d := JobSpec{Target: "t", Command: "x", Cwd: dir, Inputs: []File{{Path: "sub"}}}
	if err := ValidateSpec(&d); err != nil {
		t.Fatal(err)
	}
	if err := FillSizes(&d, os.Stat); err == nil || !strings.Contains(err.Error(), "is a directory: declare the files in it") {
		t.Errorf("a directory input: %v", err)
	}
}

func TestReadJobFileWithFiles(t *testing.T) {
	t.Parallel()
	got, err := readAll(`{"target":"t","command":"x","inputs":[{"path":"in","size":10},{"path":"/abs"}],"outputs":[{"path":"/o","size":0}]}`+"\n", JobSpec{Cwd: "/w"})
	if err != nil {
		t.Fatal(err)
	}
	js := got[0].js
	if len(js.Inputs) != 2 || js.Inputs[0].Path != "/w/in" || *js.Inputs[0].Size != 10 || js.Inputs[1].Size != nil ||
		len(js.Outputs) != 1 || *js.Outputs[0].Size != 0 {
		t.Fatalf("parsed %+v", js)
	}
	for _, bad := range []string{
		`{"target":"t","command":"x","inputs":[{"path":"/a","sise":1}]}`,
		`{"target":"t","command":"x","inputs":[{"path":"/a","size":-3}]}`,
		`{"target":"t","command":"x","inputs":[{"path":"/a","size":1.5}]}`,
		`{"target":"t","command":"x","outputs":"/a"}`,
	} {
		if _, err := readAll(bad, JobSpec{Cwd: "/w"}); err == nil || !strings.HasPrefix(err.Error(), "line 1: ") {
			t.Errorf("%s: error %v", bad, err)
		}
	}
}

// FuzzCheckPath: a path ValidateSpec accepts (input or output, relative
// or not) is one an agent can report back (CheckText passes: reports
// naming it are never refused), and a refusal is one printable line.
func FuzzCheckPath(f *testing.F) {
	for _, s := range []string{"/a", "rel/b", "a\nb\x1b[31m", "/a\u202e", "/ü b", "/a\x00", "\xff", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		js := JobSpec{Target: "t", Command: "x", Cwd: "/w", Inputs: []File{{Path: p}}, Outputs: []File{{Path: p + ".out"}}}
		err := ValidateSpec(&js)
		if err != nil {
			if msg := err.Error(); Printable(msg) != msg {
				t.Fatalf("error %q is not printable", msg)
			}
			return
		}
		for _, f := range append(js.Inputs, js.Outputs...) {
			if err := CheckText("path", f.Path, MaxPathBytes); err != nil {
				t.Fatalf("accepted %q, which a report could not carry: %v", f.Path, err)
			}
		}
	})
}

// FuzzParseFileArg: --in/--out's PATH[:SIZE] never panics; a name that
// exists is taken whole; what is not split off is the argument whole; a
// size split off is the text after the last colon, a whole size; and any
// path with a size appended reads back as that path and size, so every
// name can be declared, colons and all.
func FuzzParseFileArg(f *testing.F) {
	for _, s := range []string{"a", "a:10", "a:b.log", "sample:1.fastq", "chr1:100-200.bed", "img:10K", "img:10K:2M",
		":10M", "a:", "::", "a:1.5G", "a:-1", "a:10 ", "a:1e3", "db.fa:10X", "/d/x:y:0", "a:.5K", "a:1.", "ü:3MiB"} {
		f.Add(s, "", uint64(7))
		f.Add(s, s, uint64(0))
	}
	f.Add("db.fa:10X", "db.fa", uint64(1))
	f.Fuzz(func(t *testing.T, s, existing string, n uint64) {
		exists := func(name string) bool { return name != "" && name == existing }
		size := int64(n >> 2) // below ParseSize's bound
		for _, ex := range []func(string) bool{nil, exists} {
			got, err := ParseFileArg(s, ex)
			if err != nil {
				i := strings.LastIndexByte(s, ':')
				if s != "" && (i < 0 || i > 0 && !sizeSyntax.MatchString(s[i+1:]) && !(ex != nil && exists(s[:i]))) {
					t.Fatalf("ParseFileArg(%q, existing %q): %v", s, existing, err)
				}
				continue
			}
			if got.Path == "" {
				t.Fatalf("ParseFileArg(%q) has an empty path", s)
			}
			if ex != nil && exists(s) && (got.Path != s || got.Size != nil) {
				t.Fatalf("ParseFileArg(%q), a file there, = %+v", s, got)
			}
			if got.Size == nil {
				if got.Path != s {
					t.Fatalf("ParseFileArg(%q) = path %q without a size", s, got.Path)
				}
				continue
			}
			i := strings.LastIndexByte(s, ':')
			if i < 0 || got.Path != s[:i] {
				t.Fatalf("ParseFileArg(%q) = path %q: not what precedes the last colon", s, got.Path)
			}
			if want, err := ParseSize(s[i+1:]); err != nil || want != *got.Size || *got.Size < 0 {
				t.Fatalf("ParseFileArg(%q) = size %d; ParseSize of %q: %d, %v", s, *got.Size, s[i+1:], want, err)
			}
		}
		if s == "" {
			return
		}
		// Any name, with a size added, reads back as that name and size.
		arg := s + ":" + strconv.FormatInt(size, 10)
		for _, ex := range []func(string) bool{nil, exists} {
			if ex != nil && exists(arg) {
				continue
			}
			got, err := ParseFileArg(arg, ex)
			if err != nil || got.Path != s || got.Size == nil || *got.Size != size {
				t.Fatalf("ParseFileArg(%q) = %+v, %v; want path %q size %d", arg, got, err, s, size)
			}
		}
	})
}

// TestCheckPathTooLong: a path over the limit is named once, whatever
// names it ("stdout: path path is ..." was printed for -o).
func TestCheckPathTooLong(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("q", maxPath+1)
	for what, want := range map[string]string{
		"path":  fmt.Sprintf("path is %d bytes; the limit is %d", maxPath+1, maxPath),
		"input": fmt.Sprintf("input path is %d bytes; the limit is %d", maxPath+1, maxPath),
	} {
		if err := CheckPath(what, long); err == nil || err.Error() != want {
			t.Errorf("CheckPath(%q, long) = %v, want %q", what, err, want)
		}
	}
}
