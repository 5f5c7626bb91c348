package loadgen

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"kvroute/results"
	"kvroute/workloads"
)

// Sink receives what Run observes. Nil fields are skipped. Run calls them one at a time
// (never concurrently), so they may update unsynchronised state such as a
// results.Collector.
type Sink struct {
	// Sent is called when a request is handed to its goroutine, at its scheduled time.
	Sent func(req *workloads.Request)
	// Result is called once per request sent, with its terminal outcome, warm-up requests
	// included (Result.Warmup).
	Result func(res *Result)
}

// Stats summarises a run.
type Stats struct {
	// Sent is the number of requests sent; Warmup the number of them marked as warm-up.
	Sent, Warmup int
	// Lag is the distribution of dispatch lateness: when each request's goroutine started
	// minus its scheduled arrival (waits for a concurrency slot excluded).
	Lag results.Histogram
	// Elapsed is the wall time from the start of the run to the last Result.
	Elapsed time.Duration
}

// Run sends stream's requests to o.Target at their arrival times, reports every outcome to
// sink, and returns when the stream is exhausted and every request has ended. When ctx is
// cancelled it stops dispatching, lets the requests in flight end (they fail as
// cancelled), and returns the cause. Run also returns the stream's own error (a malformed
// dataset record). It does not close the stream.
func Run(ctx context.Context, o Options, stream *workloads.Stream, sink Sink) (Stats, error) {
	if err := o.Validate(); err != nil {
		return Stats{}, err
	}
	if stream == nil {
		return Stats{}, errors.New("loadgen: nil stream")
	}
	start := time.Now()
	d := &dispatcher{
		opts: o, stream: stream, sink: sink, start: start,
		wake:   make(chan struct{}, 1),
		sender: sender{client: o.client(), target: o.Target, model: o.Model, timeout: o.RequestTimeout, start: start},
	}
	if o.MaxConcurrency > 0 {
		d.slots = make(chan struct{}, o.MaxConcurrency)
	}
	err := d.loop(ctx)
	d.wg.Wait()
	if err == nil && ctx.Err() != nil {
		err = context.Cause(ctx) // the last requests ended because the run was stopped
	}
	d.stats.Elapsed = time.Since(start)
	return d.stats, errors.Join(err, stream.Err(), d.doneErr)
}

// dispatcher owns the stream's Peek and Next; request goroutines call Done and wake it.
type dispatcher struct {
	opts   Options
	stream *workloads.Stream
	sink   Sink
	start  time.Time
	sender sender
	slots  chan struct{} // nil: no concurrency cap
	wake   chan struct{} // capacity 1: a Done happened since the last look
	wg     sync.WaitGroup

	mu      sync.Mutex // serialises sink calls and guards stats and doneErr
	stats   Stats
	doneErr error
}

// loop dispatches until the stream ends or ctx is done.
func (d *dispatcher) loop(ctx context.Context) error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		// InFlight before Peek: with no session waiting before the peek, no Done can add a
		// follow-up after it, so "nothing to peek" then means the stream is over.
		waiting := d.stream.InFlight()
		req, ok := d.stream.Peek()
		if !ok && waiting == 0 {
			return nil
		}
		var due <-chan time.Time
		if ok {
			wait := time.Until(d.start.Add(req.Arrival))
			if wait <= 0 {
				d.dispatch(ctx)
				continue
			}
			timer.Reset(wait)
			due = timer.C
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-d.wake:
		case <-due:
		}
	}
}

// dispatch takes the next request and starts its goroutine.
func (d *dispatcher) dispatch(ctx context.Context) {
	req, ok := d.stream.Next()
	if !ok {
		return
	}
	lag := max(time.Since(d.start)-req.Arrival, 0)
	warm := req.Arrival < d.opts.Warmup
	d.mu.Lock()
	d.stats.Sent++
	if warm {
		d.stats.Warmup++
	}
	d.stats.Lag.Add(lag, 1)
	if d.sink.Sent != nil {
		d.sink.Sent(&req)
	}
	d.mu.Unlock()
	d.wg.Add(1)
	go d.serve(ctx, req, warm)
}

// serve sends one request, reports its Result and tells the stream it ended.
func (d *dispatcher) serve(ctx context.Context, req workloads.Request, warm bool) {
	defer d.wg.Done()
	var res *Result
	if d.acquire(ctx) {
		res = d.sender.send(ctx, &req)
		d.release()
	} else {
		res = &Result{Record: results.Record{ID: req.ID, Tenant: req.Tenant, Session: req.Session, Turn: req.Turn,
			PrefixGroup: req.PrefixGroup, PromptTokens: len(req.Tokens)}}
		res.Record.Arrival = d.sender.now()
		d.sender.fail(ctx, res, results.StatusFailed, errors.New("canceled: the run was stopped"))
	}
	res.Scheduled, res.Warmup = req.Arrival, warm
	d.mu.Lock()
	if d.sink.Result != nil {
		d.sink.Result(res)
	}
	d.mu.Unlock()
	rec := &res.Record
	c := workloads.Completion{At: max(rec.Finish, req.Arrival), Failed: rec.Status != results.StatusCompleted}
	if !c.Failed {
		c.Text = res.Text
	}
	if err := d.stream.Done(req.ID, c); err != nil {
		d.mu.Lock()
		d.doneErr = errors.Join(d.doneErr, fmt.Errorf("loadgen: %w", err))
		d.mu.Unlock()
	}
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// acquire takes a concurrency slot, or reports false when ctx ends first.
func (d *dispatcher) acquire(ctx context.Context) bool {
	if d.slots == nil {
		return true
	}
	select {
	case d.slots <- struct{}{}:
		return true
	case <-ctx.Done():
		return false
	}
}

func (d *dispatcher) release() {
	if d.slots != nil {
		<-d.slots
	}
}
