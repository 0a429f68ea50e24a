package driver_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mq-hpc/mq/driver"
)

// start returns a started driver running jobs on this machine. A program
// that uses a CLS sets Config.Home to its MQ_HOME instead; nothing else in
// these examples changes.
func start(cfg driver.Config) *driver.Driver {
	d, err := driver.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		log.Fatal(err)
	}
	return d
}

// Run one command, as with exec.Command: argv, no shell quoting.
func ExampleDriver_Command() {
	d := start(driver.Config{})
	defer d.Stop(context.Background())

	out, err := d.Command("echo", "hello,", "it's $HOME").Output()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(string(out))
	// Output: hello, it's $HOME
}

// Fan out 1,000 jobs and collect each result as it ends.
func ExampleDriver_Results() {
	d := start(driver.Config{Consumers: 8, Buffer: 1000})
	defer d.Stop(context.Background())
	ctx := context.Background()

	for i := 1; i <= 1000; i++ { // Exec returns once the job is buffered
		if _, err := d.Exec(ctx, "echo "+strconv.Itoa(i)); err != nil {
			log.Fatal(err)
		}
	}
	sum, n := 0, 0
	for res, err := range d.Results(ctx) { // in the order the jobs end
		if err != nil {
			log.Fatal(err)
		}
		out, err := res.Stdout(ctx)
		if err != nil {
			log.Fatal(err)
		}
		i, _ := strconv.Atoi(strings.TrimSpace(string(out)))
		sum += i
		n++
	}
	fmt.Println(n, "jobs, sum", sum)
	// Output: 1000 jobs, sum 500500
}

// A group with a batching factor: its jobs go to placeholders ten at a
// time, each keeping its own exit status and output.
func ExampleDriver_SetGroup() {
	d := start(driver.Config{})
	defer d.Stop(context.Background())
	ctx := context.Background()

	if err := d.SetGroup("short", 10); err != nil {
		log.Fatal(err)
	}
	for i := 0; i < 25; i++ {
		if _, err := d.Exec(ctx, fmt.Sprintf("exit %d", i%2), driver.Group("short")); err != nil {
			log.Fatal(err)
		}
	}
	rs, err := d.WaitForAll(ctx) // sends the incomplete last bundle at once
	if err != nil {
		log.Fatal(err)
	}
	failed := 0
	for _, r := range rs {
		failed += r.Exit
	}
	fmt.Println(len(rs), "jobs,", failed, "exited 1")
	// Output: 25 jobs, 12 exited 1
}

// A pipeline: three jobs run in order on one placeholder, each reading
// what the one before wrote.
func ExampleDriver_CreatePipeline() {
	dir, _ := os.MkdirTemp("", "pipeline")
	defer os.RemoveAll(dir)
	d := start(driver.Config{Dir: dir})
	defer d.Stop(context.Background())
	ctx := context.Background()

	if err := d.CreatePipeline("p", 3); err != nil {
		log.Fatal(err)
	}
	for _, cmd := range []string{"echo raw > a", "tr a-z A-Z < a > b", "cat b b"} {
		if _, err := d.Exec(ctx, cmd, driver.Group("p")); err != nil {
			log.Fatal(err)
		}
	}
	rs, err := d.WaitForAll(ctx)
	if err != nil {
		log.Fatal(err)
	}
	out, _ := rs[2].Stdout(ctx)
	fmt.Print(string(out))
	// Output:
	// RAW
	// RAW
}

// Cancellation: a job lives no longer than the context it was issued
// with. When it ends the job is deleted (killed if running), here or at
// the CLS alike, and Wait returns an error wrapping the context's.
func ExampleDriver_CommandContext() {
	d := start(driver.Config{})
	defer d.Stop(context.Background())

	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err := d.CommandContext(ctx, "sleep", "60").Run()
	var je *driver.JobError
	fmt.Println(errors.Is(err, context.DeadlineExceeded), errors.As(err, &je) && je.State == "X")
	// Output: true true
}

// Reading output: a result's stdout and stderr, read wherever the job ran.
func ExampleResult_Stdout() {
	d := start(driver.Config{})
	defer d.Stop(context.Background())
	ctx := context.Background()

	k, err := d.Exec(ctx, "echo out; echo err >&2; exit 3")
	if err != nil {
		log.Fatal(err)
	}
	res, err := d.WaitForOne(ctx, k)
	if err != nil {
		log.Fatal(err)
	}
	stdout, _ := res.Stdout(ctx)
	stderr, _ := res.Stderr(ctx)
	fmt.Printf("exit %d, stdout %q, stderr %q, attempt %d\n", res.Exit, stdout, stderr, res.Attempt)
	// Output: exit 3, stdout "out\n", stderr "err\n", attempt 1
}
