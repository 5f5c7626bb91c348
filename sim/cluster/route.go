package cluster

import (
	"hash/fnv"

	"kvroute/results"
	"kvroute/router"
	"kvroute/sim"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

// dispatch routes f at now and sends it to the chosen replica after the network delay.
func (s *Sim) dispatch(f *flight, now sim.Time) {
	s.ensureScraping(now)
	if s.cfg.MetricsInterval == 0 {
		s.scrape(now)
	}
	f.router = s.routerFor(&f.wreq)
	ri := s.rt[f.router]
	ri.snap.Now = s.wall(now)
	d, err := ri.policy.Pick(&f.rreq, &ri.snap)
	if err != nil {
		s.finish(f, now, results.StatusRejected, err.Error())
		return
	}
	f.endpoint, f.reason = d.Index, d.Reason
	e := &ri.snap.Endpoints[d.Index]
	e.InFlight++
	e.InFlightTokens += f.rreq.InputTokens + f.rreq.MaxOutputTokens
	if ri.obs != nil {
		ri.obs.Routed(&f.rreq, e.ID, ri.snap.Now)
	}
	rep := s.reps[d.Index]
	if s.cfg.NetworkDelay == 0 {
		rep.Submit(&f.ereq)
		return
	}
	s.k.Schedule(now+sim.Time(s.cfg.NetworkDelay), 1, func(sim.Time) { rep.Submit(&f.ereq) })
}

// replicaDone handles a replica's result, after the network delay back to the router.
func (s *Sim) replicaDone(i int, res engine.Result) {
	f := res.Request.Tag.(*flight)
	f.preemptions += res.Preemptions
	if res.Status == engine.Completed {
		f.cached = res.CachedTokens
	}
	if s.cfg.NetworkDelay == 0 {
		s.answered(i, f, res, res.Finish)
		return
	}
	s.k.Schedule(res.Finish+sim.Time(s.cfg.NetworkDelay), 1, func(now sim.Time) { s.answered(i, f, res, now) })
}

// answered releases the router's accounting for f's attempt on replica i and ends or retries f.
func (s *Sim) answered(i int, f *flight, res engine.Result, now sim.Time) {
	ri := s.rt[f.router]
	e := &ri.snap.Endpoints[i]
	e.InFlight--
	e.InFlightTokens -= f.rreq.InputTokens + f.rreq.MaxOutputTokens
	if ri.obs != nil {
		u := router.Usage{PromptTokens: res.PromptTokens, CachedTokens: res.CachedTokens, CompletionTokens: res.OutputTokens}
		ri.obs.Finished(&f.rreq, e.ID, u, s.wall(now))
	}
	switch {
	case res.Status == engine.Completed:
		s.finish(f, now, results.StatusCompleted, "")
	case res.Status == engine.Aborted && f.retries < s.cfg.MaxRetries:
		f.retries++
		f.firstToken = 0
		s.dispatch(f, now)
	case res.Status == engine.Aborted:
		s.finish(f, now, results.StatusFailed, "replica failed; retries exhausted")
	default:
		s.finish(f, now, results.StatusRejected, "prompt and output exceed the replica's KV cache")
	}
}

// finish records f's terminal state and tells the stream, which may schedule a next turn.
func (s *Sim) finish(f *flight, now sim.Time, st results.Status, msg string) {
	rec := &s.rec
	*rec = results.Record{
		ID: f.wreq.ID, Tenant: f.wreq.Tenant, Session: f.wreq.Session, Turn: f.wreq.Turn,
		PrefixGroup: f.wreq.PrefixGroup, Reason: f.reason, Status: st, Error: msg,
		Arrival: f.arrival.Duration(), Finish: now.Duration(),
		PromptTokens: len(f.wreq.Tokens), Preemptions: f.preemptions, Retries: f.retries,
	}
	if f.reason != "" {
		rec.Endpoint = s.rt[0].snap.Endpoints[f.endpoint].ID
	}
	if st == results.StatusCompleted {
		rec.FirstToken, rec.CachedTokens, rec.OutputTokens = f.firstToken.Duration(), f.cached, f.wreq.OutputTokens
	}
	s.sink.Record(rec)
	s.active--
	s.ended++
	_ = s.stream.Done(f.wreq.ID, workloads.Completion{At: now.Duration(), Failed: st != results.StatusCompleted})
	s.scheduleArrival()
	s.recycle(f)
}

// recycle keeps ended flight f for newFlight. Nothing reads it any more: the replica that
// ran it dropped its engine.Request when its Done hook returned (engine's Replica.recycle),
// no event holding it is pending (a delayed first token is scheduled before the answer it
// precedes, and the kernel runs ties in order), and the policies that remember their last
// router.Request check its ID as well as its address.
func (s *Sim) recycle(f *flight) {
	s.spare.Put(f)
}

// ensureScraping starts the periodic scrape when it is not running.
func (s *Sim) ensureScraping(now sim.Time) {
	iv := sim.Time(s.cfg.MetricsInterval)
	if iv == 0 || s.scraping {
		return
	}
	s.scraping = true
	s.scrape(now) // the fleet was idle since the last scrape: this is what it would show
	s.k.Schedule((now/iv+1)*iv, -2, s.tickFn)
}

func (s *Sim) tick(now sim.Time) {
	s.scrape(now)
	if s.active == 0 && s.arrivalAt == sim.Never {
		s.scraping = false
		return
	}
	s.k.Schedule(now+sim.Time(s.cfg.MetricsInterval), -2, s.tickFn)
}

// scrape copies each replica's metrics into the router's view.
func (s *Sim) scrape(now sim.Time) {
	t := s.wall(now)
	for i, rep := range s.reps {
		m := rep.Metrics()
		for _, ri := range s.rt {
			e := &ri.snap.Endpoints[i]
			e.Running, e.Waiting, e.KVUsage, e.NumGPUBlocks, e.UpdatedAt = m.Running, m.Waiting, m.KVUsage, m.NumGPUBlocks, t
		}
	}
}

func (s *Sim) fail(i int) {
	for _, ri := range s.rt {
		ri.snap.Endpoints[i].Ready = false // health checks eject it
		if ri.obs != nil {
			ri.obs.Removed(ri.snap.Endpoints[i].ID)
		}
	}
	s.reps[i].Fail()
}

func (s *Sim) recover(i int, now sim.Time) {
	s.reps[i].Recover()
	for _, ri := range s.rt {
		ri.snap.Endpoints[i].Ready = true
		ri.snap.Endpoints[i].UpdatedAt = s.wall(now)
	}
}

// routerFor picks the router replica a request reaches: by a hash of its id (random), or of
// its session or tenant (affinity; a request with neither falls back to its id).
func (s *Sim) routerFor(w *workloads.Request) int {
	n := len(s.rt)
	if n == 1 {
		return 0
	}
	key := w.ID
	if s.cfg.Routers.Assign == AssignAffinity {
		switch {
		case w.Session != "":
			key = w.Session
		case w.Tenant != "":
			key = w.Tenant
		}
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return int(h.Sum64() % uint64(n))
}
