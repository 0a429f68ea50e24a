// Package stage moves files between places through the CLS: the CLS
// host's filesystem (Dir) and sites' data roots reached over the SSH
// connection the site manager keeps (SFTP).
//
// A Mover copies one file from one Place to another: it streams with
// bounded buffers (no file is held in memory), hashes the bytes as they
// pass, writes a temporary name beside the target, and renames it into
// place only after the size and SHA-256 are verified, so a target is never
// seen partial. Concurrent moves of the same path to the same place share
// one transfer. Each transfer's bytes and seconds can feed Rates, a
// per-place latency and bandwidth estimate.
//
// Every path goes through Rooted, the one path rule: a logical path is
// absolute, has no "..", and maps to root+path; places also refuse
// symbolic links that lead out of their root.
package stage

// DefaultWorkers is how many files the CLS moves at once unless told
// otherwise (cls serve --stage-workers); the simulator's model of live
// staging moves as many.
const DefaultWorkers = 4
