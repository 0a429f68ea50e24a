// Package spool is the binary encoding of job specs a bulk submit
// (mqsub -f, mqsub --array) spools to disk while a client uploads: the
// core appends each validated spec as it arrives and reads them back, in
// order, when the bulk commits. It is smaller and much faster to read back
// than JSON, which matters at ten million jobs.
//
// The spool is the CLS's own file, but its bytes are read back from disk:
// Read returns an error for bytes it did not write, never panics.
package spool

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"

	"github.com/mq-hpc/mq/protocol"
)

// ErrCorrupt is returned for bytes that cannot be a spooled spec.
var ErrCorrupt = errors.New("corrupt spool")

// Flags of a spec, one bit each.
const (
	flagNoReplicate = 1 << iota
	flagHold
	flagResources // followed by the resources as JSON
)

// Append appends js's encoding to b. Fields that ValidateSpec has moved
// into Env (stdio, time limit) travel there.
func Append(b []byte, js *protocol.JobSpec) []byte {
	b = appendString(b, js.Queue)
	b = appendString(b, js.Target)
	b = appendString(b, js.Command)
	b = appendString(b, js.Cwd)
	b = binary.LittleEndian.AppendUint64(b, math.Float64bits(js.Est))
	b = binary.AppendUvarint(b, uint64(len(js.Prereqs)))
	for _, p := range js.Prereqs {
		b = appendString(b, p)
	}
	b = binary.AppendUvarint(b, uint64(len(js.AfterAny)))
	for _, p := range js.AfterAny {
		b = appendString(b, p)
	}
	for _, files := range [][]protocol.File{js.Inputs, js.Outputs} {
		b = binary.AppendUvarint(b, uint64(len(files)))
		for _, f := range files {
			b = appendString(b, f.Path)
			size := uint64(0) // unknown; else size+1
			if f.Size != nil {
				size = uint64(*f.Size) + 1
			}
			b = binary.AppendUvarint(b, size)
			var rel uint64
			if f.Rel {
				rel = 1
			}
			b = binary.AppendUvarint(b, rel)
			b = binary.AppendVarint(b, f.MTime)
		}
	}
	env := protocol.EnvList(js.Env)
	b = binary.AppendUvarint(b, uint64(len(env)))
	for _, kv := range env {
		b = appendString(b, kv)
	}
	var flags uint64
	if js.NoReplicate {
		flags |= flagNoReplicate
	}
	if js.Hold {
		flags |= flagHold
	}
	var res []byte
	if js.Resources.Asks() {
		flags |= flagResources
		res, _ = json.Marshal(js.Resources) // plain values: cannot fail
	}
	b = binary.AppendUvarint(b, flags)
	b = binary.AppendVarint(b, int64(js.Priority))
	if flags&flagResources != 0 {
		b = appendString(b, string(res))
	}
	return b
}

// Read reads the next spec into js, replacing what it held. At the end of
// the spool it returns io.EOF; a spec cut short gives an error too.
func Read(r *bufio.Reader, js *protocol.JobSpec) (err error) {
	*js = protocol.JobSpec{}
	for _, s := range []*string{&js.Queue, &js.Target, &js.Command, &js.Cwd} {
		if *s, err = readString(r); err != nil {
			return err
		}
	}
	var est [8]byte
	if _, err = io.ReadFull(r, est[:]); err != nil {
		return err
	}
	js.Est = math.Float64frombits(binary.LittleEndian.Uint64(est[:]))
	n, err := readCount(r, 10000)
	if err != nil {
		return err
	}
	for ; n > 0; n-- {
		p, err := readString(r)
		if err != nil {
			return err
		}
		js.Prereqs = append(js.Prereqs, p)
	}
	if n, err = readCount(r, 10000); err != nil {
		return err
	}
	for ; n > 0; n-- {
		p, err := readString(r)
		if err != nil {
			return err
		}
		js.AfterAny = append(js.AfterAny, p)
	}
	for _, files := range []*[]protocol.File{&js.Inputs, &js.Outputs} {
		if *files, err = readFiles(r); err != nil {
			return err
		}
	}
	if n, err = readCount(r, protocol.MaxEnvBytes); err != nil {
		return err
	}
	for ; n > 0; n-- {
		kv, err := readString(r)
		if err != nil {
			return err
		}
		k, v, _ := strings.Cut(kv, "=")
		if js.Env == nil {
			js.Env = map[string]string{}
		}
		js.Env[k] = v
	}
	flags, err := binary.ReadUvarint(r)
	if err != nil {
		return err
	}
	js.NoReplicate = flags&flagNoReplicate != 0
	js.Hold = flags&flagHold != 0
	p, err := binary.ReadVarint(r)
	if err != nil {
		return err
	}
	js.Priority = int(p)
	if flags&flagResources != 0 {
		res, err := readString(r)
		if err != nil {
			return err
		}
		if err := json.Unmarshal([]byte(res), &js.Resources); err != nil {
			return ErrCorrupt
		}
	}
	return nil
}

func readFiles(r *bufio.Reader) ([]protocol.File, error) {
	n, err := readCount(r, protocol.MaxFiles)
	if err != nil {
		return nil, err
	}
	var files []protocol.File
	for ; n > 0; n-- {
		f := protocol.File{}
		if f.Path, err = readString(r); err != nil {
			return nil, err
		}
		size, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		if size > 0 {
			v := int64(size - 1)
			f.Size = &v
		}
		rel, err := binary.ReadUvarint(r)
		if err != nil {
			return nil, err
		}
		f.Rel = rel == 1
		if f.MTime, err = binary.ReadVarint(r); err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// readCount reads a count of at most limit.
func readCount(r *bufio.Reader, limit uint64) (uint64, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, err
	}
	if n > limit {
		return 0, ErrCorrupt
	}
	return n, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func readString(r *bufio.Reader) (string, error) {
	n, err := readCount(r, protocol.MaxFrame)
	if err != nil {
		return "", err
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		return "", err
	}
	return string(buf), nil
}
