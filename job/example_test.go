package job_test

import (
	"fmt"

	"github.com/mq-hpc/mq/job"
)

// The letters mqstat -s takes, as the states they name.
func ExampleParseStates() {
	states, err := job.ParseStates("QE")
	fmt.Println(states, err)
	_, err = job.ParseStates("R")
	fmt.Println(err)
	// Output:
	// [Q E] <nil>
	// unknown job state "R" (want one of WQHPEDFBX)
}

// Where a job's attempt keeps its output under the CLS's output
// directory: a directory per thousand jobs keeps each small.
func ExampleOutputPaths() {
	stdout, stderr := job.OutputPaths("/home/u/.mq/output", 1234567, 2)
	fmt.Println(stdout)
	fmt.Println(stderr)
	// Output:
	// /home/u/.mq/output/1234/1234567.2.out
	// /home/u/.mq/output/1234/1234567.2.err
}
