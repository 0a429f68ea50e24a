package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/mq-hpc/mq/protocol"
)

// fileList collects repeated --in/--out PATH[:SIZE] values as given. Unlike
// a string slice flag it does not split at commas, which paths may
// contain. They are read once the job's directory is known (files): an
// argument naming a file there is that file, colons and all.
type fileList struct{ args []string }

// Serialize is what urfave/cli copies to the flag's aliases (--in to
// --input): aliasCopy, never a file someone gave.
func (l *fileList) Serialize() string { return aliasCopy }

func (l *fileList) Set(v string) error {
	if v == aliasCopy {
		return nil
	}
	if v == "" {
		return errors.New("empty file argument")
	}
	l.args = append(l.args, v)
	return nil
}

func (l *fileList) String() string { return strings.Join(l.args, " ") }

// files reads the arguments, relative ones against dir, the job's
// directory on this host.
func (l *fileList) files(dir string) ([]protocol.File, error) {
	exists := func(name string) bool {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		_, err := os.Lstat(name)
		return err == nil
	}
	var out []protocol.File
	for _, a := range l.args {
		f, err := protocol.ParseFileArg(a, exists)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// declaredFiles reads --in and --out for a job in dir.
func declaredFiles(c *cli.Context, dir string) (ins, outs []protocol.File, err error) {
	if ins, err = c.Generic("in").(*fileList).files(dir); err != nil {
		return nil, nil, Usagef("--in %v", err)
	}
	if outs, err = c.Generic("out").(*fileList).files(dir); err != nil {
		return nil, nil, Usagef("--out %v", err)
	}
	return ins, outs, nil
}
