package client_test

import (
	"context"
	"fmt"
	"log"

	"github.com/mq-hpc/mq/client"
	"github.com/mq-hpc/mq/protocol"
)

// dial connects to the CLS of $MQ_HOME, else ~/.mq, as the commands do.
func dial(ctx context.Context) *client.Client {
	home, err := client.Home()
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.Dial(ctx, home, "", "example")
	if err != nil {
		log.Fatal(err) // no CLS: cls serve starts one
	}
	return c
}

// Submit a job to the CLS of $MQ_HOME (else ~/.mq), as mqsub does, and
// list the jobs of its target, as mqstat -t does.
func Example() {
	ctx := context.Background()
	c := dial(ctx)
	defer c.Close()

	r, err := client.Do(ctx, c, protocol.OpSubmit, protocol.Submit{Jobs: []protocol.JobSpec{
		{Target: "align", Command: "bwa mem ref.fa r1.fq > r1.sam", Cwd: "/scratch/run1"},
	}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("submitted", r.IDs)

	// A listing comes in frames of up to 1,000 jobs: memory stays bounded
	// however many jobs the target has.
	err = client.Stream(ctx, c, protocol.OpStat, protocol.Stat{Target: "align"}, func(f protocol.StatReply) error {
		for _, j := range f.Jobs {
			fmt.Println(j.ID, j.State, j.Command)
		}
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
}

// Many requests on one connection: Go sends each at once and the
// replies are matched as they come, so a client need not wait for one
// before the next.
func ExampleGo() {
	ctx := context.Background()
	c := dial(ctx)
	defer c.Close()

	var calls []*client.Call[protocol.JobDetail]
	for _, id := range []int64{501, 502, 503} {
		call, err := client.Go(c, protocol.OpJob, protocol.JobQuery{ID: id})
		if err != nil {
			log.Fatal(err)
		}
		calls = append(calls, call)
	}
	for _, call := range calls {
		d, err := call.Wait(ctx)
		if err != nil {
			log.Print(err) // e.g. job 503 does not exist
			continue
		}
		fmt.Println(d.ID, d.State)
	}
}
