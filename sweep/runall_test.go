package sweep

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"kvroute/results"
)

func TestRunAll(t *testing.T) {
	jobs := make([]Job, 40)
	for i := range jobs {
		jobs[i] = Job{Index: i, Name: fmt.Sprint("run", i)}
	}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name     string
		parallel int
		failAt   int // -1: none
	}{{"serial", 1, -1}, {"parallel", 4, -1}, {"zero means one", 0, -1}, {"a failure cancels the rest", 1, 5}} {
		t.Run(tc.name, func(t *testing.T) {
			var running, peak, heard atomic.Int64
			runs, err := RunAll(context.Background(), jobs, tc.parallel, func(ctx context.Context, j Job) (results.Run, error) {
				n := running.Add(1)
				defer running.Add(-1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				if j.Index == tc.failAt {
					return results.Run{}, boom
				}
				return results.Run{Name: j.Name}, ctx.Err()
			}, func(Job, results.Run) { heard.Add(1) })
			if tc.failAt >= 0 {
				if !errors.Is(err, boom) {
					t.Fatalf("err = %v, want boom", err)
				}
				if runs[tc.failAt].Name != "" || runs[len(runs)-1].Name != "" {
					t.Error("the failed job, and the jobs after it on one worker, must have no run")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range runs {
				if r.Name != jobs[i].Name {
					t.Fatalf("runs[%d] = %q, want %q: runs come back in job order", i, r.Name, jobs[i].Name)
				}
			}
			if p := peak.Load(); p > int64(max(tc.parallel, 1)) {
				t.Errorf("%d jobs ran at once, want at most %d", p, max(tc.parallel, 1))
			}
			if heard.Load() != int64(len(jobs)) {
				t.Errorf("finished heard %d jobs, want %d", heard.Load(), len(jobs))
			}
		})
	}
}
