package sweep

import (
	"context"
	"sync"

	"kvroute/results"
)

// RunAll runs jobs parallel at a time (at least one), each through execute, usually a
// wrapper of Job.Execute that gives it a writer for its request rows, and returns one
// results.Run per job, in job order. finished, when not nil, hears each job that succeeded,
// from the goroutine that ran it. The first error cancels the jobs not yet started and is
// returned; a job that did not finish (failed or cancelled) leaves its entry without a name.
func RunAll(ctx context.Context, jobs []Job, parallel int, execute func(context.Context, Job) (results.Run, error), finished func(Job, results.Run)) ([]results.Run, error) {
	runs := make([]results.Run, len(jobs))
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(max(parallel, 1), len(jobs)) {
		wg.Go(func() {
			for i := range work {
				run, err := execute(ctx, jobs[i])
				if err != nil {
					cancel(err)
					continue
				}
				runs[i] = run
				if finished != nil {
					finished(jobs[i], run)
				}
			}
		})
	}
	for i := range jobs {
		select {
		case work <- i:
		case <-ctx.Done():
		}
	}
	close(work)
	wg.Wait()
	return runs, context.Cause(ctx)
}
