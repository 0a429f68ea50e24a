// Package jobexec builds the process that runs a job's command line, the
// one rule for placeholders and the driver's local mode, and reads what it
// used (UsageOf).
package jobexec

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mq-hpc/mq/internal/shellwords"
)

// Command is how a job's command line runs: `/bin/sh -c LINE`, or, when
// the line is one simple command with nothing for a shell to do
// (shellwords.Simple) and its program is found on the job's PATH, that
// program exec'd directly, with the environment the shell would have given
// it. The shell costs a fork and an exec per job (about a millisecond of
// CPU and of dependency hop here), and a placeholder's SIGKILL on death
// reaches the program only when it is the placeholder's own child: dash
// forks even a lone command. direct reports which it is; a direct command
// that fails to start is to be retried through the shell (Shell), which
// then gives the usual messages and exit statuses (a script without a #!
// line, a program not executable).
func Command(line string, env []string, dir string) (cmd *exec.Cmd, direct bool) {
	words, ok := shellwords.Simple(line)
	if !ok || shellFunctions(env) {
		return Shell(line, env), false
	}
	path, ok := findProgram(words[0], lookupEnv(env, "PATH"))
	if !ok {
		return Shell(line, env), false
	}
	cmd = &exec.Cmd{Path: path, Args: words}
	cmd.Env = append(env[:len(env):len(env)], "PWD="+shellPWD(lookupEnv(env, "PWD"), dir)) // never into the caller's array
	return cmd, true
}

// Shell is `/bin/sh -c line` with env.
func Shell(line string, env []string) *exec.Cmd {
	cmd := exec.Command("/bin/sh", "-c", line)
	cmd.Env = env
	return cmd
}

// shellFunctions reports whether env exports bash functions: with bash as
// /bin/sh, one could stand in for the program.
func shellFunctions(env []string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, "BASH_FUNC_") {
			return true
		}
	}
	return false
}

// lookupEnv is the value of the last name=value in env, as exec gives it.
func lookupEnv(env []string, name string) string {
	for i := len(env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(env[i], name+"="); ok {
			return v
		}
	}
	return ""
}

// findProgram looks name up the way the shell would: a name with a slash
// is the path itself (relative to the job's directory: exec.Cmd resolves
// it after the chdir); else the first executable regular file in PATH.
// A PATH that is unset or has a relative or empty entry (the working
// directory) is left to the shell.
func findProgram(name, path string) (string, bool) {
	if strings.Contains(name, "/") {
		return name, true
	}
	if path == "" {
		return "", false
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			return "", false
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && syscall.Access(p, 1) == nil {
			return p, true
		}
	}
	return "", false
}

// shellPWD is the PWD a POSIX shell exports for its working directory dir
// (the placeholder's when ""): the inherited one if it is an absolute name
// of that directory without . or .. in it, else the physical path.
func shellPWD(inherited, dir string) string {
	if dir == "" {
		dir = "."
	}
	here, err := os.Stat(dir)
	if err != nil {
		return inherited // the chdir will fail, and so will the start
	}
	if filepath.IsAbs(inherited) && filepath.Clean(inherited) == inherited {
		if fi, err := os.Stat(inherited); err == nil && os.SameFile(fi, here) {
			return inherited
		}
	}
	if abs, err := filepath.Abs(dir); err == nil {
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			return real
		}
	}
	return inherited
}
