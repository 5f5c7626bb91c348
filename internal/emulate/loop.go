package emulate

import (
	"context"
	"fmt"
	"math"
	"time"

	"kvroute/gpumodel"
	"kvroute/internal/kvevents"
	"kvroute/sim"
	"kvroute/sim/engine"
)

// core is the state the engine loop owns: the kernel, the engine, the mapping of virtual to
// wall time, and the per-request token pacing. Only the loop goroutine touches it once the
// replica has started.
type core struct {
	k     *sim.Kernel
	eng   *engine.Replica
	speed float64   // virtual seconds per wall second
	slow  float64   // step-time multiplier set by SetSlowdown
	start time.Time // the wall time of virtual time 0

	active  []*stream // have their first token and are not known to have ended
	skipped []*stream // scratch for pace
	fresh   int       // streams appended to active during the step now ending
	lastGen int64     // engine GenerationTokens at the last step end

	kv  *kvOut              // nil unless the replica publishes KV events
	pd  PDConfig            // the replica's P/D role and link
	dep gpumodel.Deployment // prices a decode leg's read (PDConfig.transferTime)
	off *offloadStats       // nil unless the replica has a CPU tier

	ttft, e2e histogram  // in wall seconds
	phases    phaseHists // in wall seconds and tokens
	lastPT    int64      // engine PromptTokens at the last step end
	success   int64      // requests that completed
}

func newCore(cfg Config, d gpumodel.Deployment) (*core, error) {
	c := &core{k: sim.NewKernel(), speed: cfg.Speed, slow: 1, pd: cfg.PD, dep: d,
		ttft: newHistogram(ttftBuckets), e2e: newHistogram(e2eBuckets), phases: newPhaseHists()}
	rel, err := engine.ParseRelease(cfg.VLLM)
	if err != nil {
		return nil, fmt.Errorf("emulate: vllm: %w", err)
	}
	hooks := engine.Hooks{FirstToken: c.firstToken, Done: c.done, Step: c.step}
	if cfg.KVEvents.Endpoint != "" {
		c.kv = &kvOut{enc: kvevents.Positional, blockSize: d.BlockSize,
			now: func() float64 { return float64(time.Now().UnixNano()) / 1e9 }}
		if cfg.KVEvents.NamedFields {
			c.kv.enc = kvevents.Named
		}
		hooks.KV = c.kv.add
	}
	if cfg.PD.Role != "" {
		hooks.RemoteRead = c.remoteRead
	}
	if cfg.Offload.Enabled() {
		c.off = &offloadStats{store: newHistogram(offloadSizeBuckets), load: newHistogram(offloadSizeBuckets)}
		hooks.Transfer = c.off.transfer
	}
	eng, err := engine.New(c.k, engine.Config{Deployment: d, NumBlocks: cfg.NumBlocks, StepTime: cfg.StepTime,
		Stretch: c.stretch, Release: rel, Offload: cfg.Offload, KVTransfer: cfg.PD.engineConfig()}, hooks)
	if err != nil {
		return nil, err
	}
	c.eng = eng
	return c, nil
}

// run is the engine loop: it runs the events whose virtual time has come, then sleeps until
// the step in flight ends or a request or control function arrives. It returns when ctx is
// done or the kernel fails, after aborting every request in flight.
func (c *core) run(ctx context.Context, submit <-chan *stream, ctl <-chan func(*core)) error {
	c.start = time.Now()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer c.fail()
	for {
		if err := c.advance(time.Now()); err != nil {
			return err
		}
		var wake <-chan time.Time
		if at, ok := c.k.Next(); ok {
			timer.Reset(time.Until(c.wallAt(at)))
			wake = timer.C
		}
		select {
		case <-ctx.Done():
			return nil
		case st := <-submit:
			if err := c.advance(time.Now()); err != nil {
				return err
			}
			st.arrival = c.k.Now()
			c.eng.Submit(&st.req)
		case f := <-ctl:
			if err := c.advance(time.Now()); err != nil {
				return err
			}
			f(c)
		case <-wake:
		}
		timer.Stop()
	}
}

// virtual maps a wall time to virtual time: (wall − start) × speed.
func (c *core) virtual(wall time.Time) sim.Time {
	return sim.Time(float64(wall.Sub(c.start)) * c.speed)
}

// wallAt maps virtual time t to the earliest wall time whose virtual time is at least t.
func (c *core) wallAt(t sim.Time) time.Time {
	return c.start.Add(time.Duration(math.Ceil(float64(t) / c.speed)))
}

// seconds converts a virtual duration to the wall seconds it takes.
func (c *core) seconds(d sim.Time) float64 { return d.Seconds() / c.speed }

// advance runs every event up to the virtual time of wall.
func (c *core) advance(wall time.Time) error {
	v := c.virtual(wall)
	if at, ok := c.k.Next(); ok && v < at && !wall.Before(c.wallAt(at)) {
		v = at // float rounding must not leave a due event unfired
	}
	err := c.k.Run(max(v, c.k.Now()))
	if c.kv != nil && c.kv.pub != nil {
		c.kv.flush() // one batch per loop turn, as vLLM publishes one per engine step
	}
	return err
}

// stretch stretches a step's duration, as the engine priced it, by the slowdown.
func (c *core) stretch(d time.Duration) time.Duration {
	return max(time.Duration(float64(d)*c.slow), time.Nanosecond)
}

// firstToken publishes a request's first token.
func (c *core) firstToken(req *engine.Request, at sim.Time) {
	st := req.Tag.(*stream)
	c.ttft.observe(c.seconds(at - st.arrival))
	st.lastTok = at
	st.first(time.Duration(at - st.arrival))
	c.active = append(c.active, st)
	c.fresh++
}

// step runs at each step end, before the step's completions are reported. The engine's
// generation counter says how many tokens the step produced; after the fresh first tokens,
// they go one each to the active requests in order, and the requests that got none (skipped
// by the token budget, or preempted) move to the back, as the engine's running list does.
// Every running request decodes in every step unless the budget runs out or it is preempted,
// so the pacing is exact then. A request's last token is kept for its completion, so its
// count and finish time always match the engine's.
func (c *core) step(at sim.Time, _ time.Duration, _ gpumodel.Step) {
	m := c.eng.Metrics()
	gen := m.GenerationTokens
	n := int(gen-c.lastGen) - c.fresh
	c.phases.iter.observe(float64(m.PromptTokens - c.lastPT + gen - c.lastGen))
	c.lastGen, c.lastPT = gen, m.PromptTokens
	old := len(c.active) - c.fresh
	c.fresh = 0
	kept, skipped := c.active[:0], c.skipped[:0]
	for _, st := range c.active[:old] {
		switch {
		case st.ended:
		case n > 0:
			n--
			c.phases.tpot.observe(c.seconds(at - st.lastTok))
			st.lastTok = at
			if st.sent < st.req.OutputTokens-1 {
				st.publish(1, nil)
			}
			kept = append(kept, st)
		default:
			skipped = append(skipped, st)
		}
	}
	kept = append(kept, c.active[old:]...)
	kept = append(kept, skipped...)
	clear(c.active[len(kept):])
	clear(skipped)
	c.active, c.skipped = kept, skipped[:0]
}

// done publishes a request's end, with the tokens it had left.
func (c *core) done(res engine.Result) {
	st := res.Request.Tag.(*stream)
	st.ended = true
	if res.Request.PD == engine.PDPrefill && res.Status == engine.Completed {
		st.heldBlocks = c.eng.HeldBlocks(res.Request)
	}
	rest := 0
	if res.Status == engine.Completed {
		rest = max(res.OutputTokens-st.sent, 0)
		c.e2e.observe(c.seconds(res.Finish - res.Arrival))
		c.phases.observeRequest(res, c.seconds)
		c.success++
	}
	st.publish(rest, &res)
}

// fail takes the engine down, aborting every request in flight.
func (c *core) fail() {
	c.eng.Fail()
	clear(c.active)
	c.active, c.fresh = c.active[:0], 0
	c.lastGen, c.lastPT = c.eng.Metrics().GenerationTokens, c.eng.Metrics().PromptTokens
}

// snapshot is what /metrics shows.
type snapshot struct {
	engine.Metrics
	TTFT, E2E histogram
	// Phases are the step and per-request phase histograms.
	Phases  phaseHists
	Success int64
	// Offload, with a CPU tier, holds its size in blocks and its transfer-size histograms.
	Offload *offloadStats
}

func (c *core) snapshot() snapshot {
	s := snapshot{Metrics: c.eng.Metrics(), TTFT: c.ttft.clone(), E2E: c.e2e.clone(), Phases: c.phases.clone(), Success: c.success}
	if c.off != nil {
		s.Offload = &offloadStats{cpuBlocks: c.eng.CPUBlocks(), store: c.off.store.clone(), load: c.off.load.clone()}
	}
	return s
}
