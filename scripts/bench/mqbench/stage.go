package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/mq-hpc/mq/internal/site/login"
	"github.com/mq-hpc/mq/internal/stage"
)

// stageBench measures package stage between the CLS host and a login
// host, over the same kind of SSH connection the site manager keeps: one
// big file, then many small ones pipelined on the one connection.
//
//	mqbench stage -addr 127.0.0.1:2298 -user mquser -key K -known-hosts F \
//	    -src DIR [-big NAME] [-small DIR -files N -size B -gen] [-parallel P] [-root R] [-between R2]
//
// Files are named by their path under -src (the logical path of package
// stage, with -src standing in for "/"); they land under -root on the
// login host. -gen makes the small files first (not timed). With -between
// the files are first staged to -root (not timed), and what is timed is
// their staging from there to a second site, R2 over a second SSH
// connection, through this process: a file made at one site and read at
// another goes so through the CLS.
func stageBench(args []string) error {
	fs := flag.NewFlagSet("stage", flag.ExitOnError)
	addr := fs.String("addr", "127.0.0.1:2298", "login host:port")
	user := fs.String("user", "mquser", "login user")
	key := fs.String("key", "", "private key file")
	kh := fs.String("known-hosts", "", "known_hosts file")
	src := fs.String("src", "", "local directory standing in for the CLS host's /")
	root := fs.String("root", ".mq-stage-bench/stage", "data root on the login host")
	big := fs.String("big", "", "logical path of the big file (under -src); empty: none")
	small := fs.String("small", "", "logical directory of the small files; empty: none")
	files := fs.Int("files", 10000, "small files")
	size := fs.Int("size", 10<<10, "bytes per small file")
	gen := fs.Bool("gen", false, "make the small files first")
	parallel := fs.Int("parallel", 32, "small-file transfers at a time")
	between := fs.String("between", "", "data root of a second site (a second connection): time site to site")
	fs.Parse(args)
	if *src == "" {
		return errors.New("-src is required")
	}
	ctx := context.Background()
	conn, err := login.DialSSH(ctx, login.SSHConfig{User: *user, Addr: *addr, KeyFile: *key, KnownHosts: *kh})
	if err != nil {
		return err
	}
	defer conn.Close()
	c, err := conn.SFTP()
	if err != nil {
		return err
	}
	places := map[string]stage.Place{
		"local": stage.Dir{Root: *src},
		"site":  stage.SFTP{Client: c, Root: *root, Drop: func() bool { return conn.EndSFTP(c) }},
	}
	from, to := "local", "site"
	if *between != "" {
		conn2, err := login.DialSSH(ctx, login.SSHConfig{User: *user, Addr: *addr, KeyFile: *key, KnownHosts: *kh})
		if err != nil {
			return err
		}
		defer conn2.Close()
		c2, err := conn2.SFTP()
		if err != nil {
			return err
		}
		places["site2"] = stage.SFTP{Client: c2, Root: *between, Writer: "site2", Drop: func() bool { return conn2.EndSFTP(c2) }}
		from, to = "site", "site2"
	}
	m := &stage.Mover{Places: func(name string) (stage.Place, error) { return places[name], nil }}

	if *big != "" {
		if from != "local" {
			if res := m.Move(ctx, stage.Transfer{Path: *big, From: "local", To: from, Size: -1}); res.Err != nil {
				return res.Err
			}
		}
		start := time.Now()
		res := m.Move(ctx, stage.Transfer{Path: *big, From: from, To: to, Size: -1})
		if res.Err != nil {
			return res.Err
		}
		s := time.Since(start).Seconds()
		fmt.Printf("big_bytes=%d big_seconds=%.3f big_MBps=%.1f\n", res.Bytes, s, float64(res.Bytes)/s/1e6)
	}
	if *small != "" {
		ts := make([]stage.Transfer, *files)
		data := make([]byte, *size)
		for i := range ts {
			name := fmt.Sprintf("%s/d%03d/f%05d", *small, i/100, i)
			ts[i] = stage.Transfer{Path: name, From: from, To: to, Size: int64(*size)}
			if *gen {
				copy(data, fmt.Sprintf("%d\n", i)) // distinct contents
				if err := os.MkdirAll(filepath.Dir(*src+name), 0o755); err != nil {
					return err
				}
				if err := os.WriteFile(*src+name, data, 0o644); err != nil {
					return err
				}
			}
		}
		if from != "local" {
			first := make([]stage.Transfer, len(ts))
			for i, t := range ts {
				first[i] = stage.Transfer{Path: t.Path, From: "local", To: from, Size: t.Size}
			}
			for _, res := range m.MoveAll(ctx, first, *parallel) {
				if res.Err != nil {
					return res.Err
				}
			}
		}
		start := time.Now()
		for _, res := range m.MoveAll(ctx, ts, *parallel) {
			if res.Err != nil {
				return res.Err
			}
		}
		s := time.Since(start).Seconds()
		fmt.Printf("small_files=%d small_seconds=%.3f small_files_per_s=%.1f\n", *files, s, float64(*files)/s)
	}
	return nil
}
