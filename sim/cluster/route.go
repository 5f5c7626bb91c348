package cluster

import (
	"errors"
	"hash/fnv"

	"kvroute/results"
	"kvroute/router"
	"kvroute/sim"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

// dispatch routes f at now through its router's lifecycle and sends it to the chosen
// replica.
func (s *Sim) dispatch(f *flight, now sim.Time) {
	s.refresh(now)
	f.router = s.routerFor(&f.wreq)
	if s.pd != nil {
		s.dispatchPD(f, now)
		return
	}
	if err := s.rt[f.router].lc.Decide(&f.ticket, &f.rreq, s.wall(now)); err != nil {
		s.finish(f, now, results.StatusRejected, err.Error())
		return
	}
	s.send(f, now)
}

// refresh brings the routers' scraped view up to now: starts the periodic scrape, or
// scrapes at every decision when the interval is 0.
func (s *Sim) refresh(now sim.Time) {
	s.ensureScraping(now)
	if s.cfg.MetricsInterval == 0 {
		s.scrape(now)
	}
}

// send submits f to the replica its ticket names, after the network delay.
func (s *Sim) send(f *flight, now sim.Time) {
	d := f.tk().Decision()
	f.endpoint, f.reason = d.Index, d.Reason
	if s.pd != nil {
		f.endpoint = s.pd.pools[1][d.Index]
	}
	if s.cfg.NetworkDelay == 0 {
		s.submit(f)
		return
	}
	s.k.Schedule(now+sim.Time(s.cfg.NetworkDelay), 1, func(sim.Time) { s.submit(f) })
}

// submit hands f to its replica; a replica that is down refuses it (its engine aborts it).
func (s *Sim) submit(f *flight) {
	rep := s.reps[f.endpoint]
	f.refused = rep.Down()
	rep.Submit(&f.ereq)
}

// replicaDone handles a replica's result, after the network delay back to the router.
func (s *Sim) replicaDone(res engine.Result) {
	if res.Request.PD == engine.PDPrefill {
		s.legDone(res)
		return
	}
	f := res.Request.Tag.(*flight)
	f.preemptions += res.Preemptions
	if res.Status == engine.Completed {
		f.cached, f.cpuCached = res.CachedTokens, res.CPUCachedTokens
		if res.RemoteTokens > 0 { // read from the prefill replica: its hit is the request's
			f.cached, f.cpuCached = f.pd.cached, 0
		}
	}
	if s.cfg.NetworkDelay == 0 {
		s.answered(f, res, res.Finish)
		return
	}
	s.k.Schedule(res.Finish+sim.Time(s.cfg.NetworkDelay), 1, func(now sim.Time) { s.answered(f, res, now) })
}

// answered ends f's attempt on its replica through its ticket under the failure rule: a
// request aborted by a replica failure before its first token, when no byte of its answer
// had reached the client, is retried; one aborted after (a stream the client was reading)
// fails, as it does live.
func (s *Sim) answered(f *flight, res engine.Result, now sim.Time) {
	if res.Status == engine.Aborted && f.firstToken == 0 && (f.pd == nil || !f.pd.failed) {
		s.retry(f, now)
		return
	}
	u := router.Usage{PromptTokens: res.PromptTokens, CachedTokens: res.CachedTokens, CompletionTokens: res.OutputTokens}
	f.tk().Finish(u, s.wall(now))
	if f.pd != nil && f.pd.failed && res.Status == engine.Aborted {
		s.finish(f, now, results.StatusFailed, "kv transfer failed (kv_load_failure_policy fail)")
		return
	}
	switch res.Status {
	case engine.Completed:
		s.finish(f, now, results.StatusCompleted, "")
	case engine.Aborted:
		s.finish(f, now, results.StatusFailed, "replica failed after the first token reached the client")
	default:
		s.finish(f, now, results.StatusRejected, "prompt and output exceed the replica's KV cache")
	}
}

// retry tries f on another replica, or ends it when the failure rule says no more. A
// replica that refused f is ejected by f's router first, as a refused connection ejects a
// backend live.
func (s *Sim) retry(f *flight, now sim.Time) {
	err := s.retryOn(s.rt[f.router].lc, f.tk(), f.endpoint, f.refused, now)
	switch {
	case err == nil:
		f.retries = f.tk().Retries()
		if f.pd != nil {
			f.retries += f.pd.retries // the prefill leg's, before
		}
		f.firstToken = 0
		f.ereq.PD = engine.PDNone // a split fleet's decode retry prefills on its new replica
		s.send(f, now)
	case errors.Is(err, router.ErrRetriesExhausted):
		s.finish(f, now, results.StatusFailed, "replica failed; retries exhausted")
	default:
		s.finish(f, now, results.StatusRejected, err.Error())
	}
}

// retryOn asks ticket tk of lifecycle lc for another endpoint after endpoint ep failed the
// request, with the one failure rule: an endpoint that refused it is ejected until a scrape
// finds it up, and the view is refreshed first.
func (s *Sim) retryOn(lc *router.Lifecycle, tk *router.Ticket, ep int, refused bool, now sim.Time) error {
	if refused {
		lc.Eject(s.ids[ep])
		s.ejected[ep] = true
	}
	s.refresh(now)
	return tk.Retry(s.wall(now))
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
		rec.Endpoint = s.ids[f.endpoint]
	}
	if st == results.StatusCompleted {
		rec.FirstToken, rec.CachedTokens, rec.OutputTokens = f.firstToken.Duration(), f.cached, f.wreq.OutputTokens
		rec.CPUCachedTokens = f.cpuCached
	}
	if f.pd != nil && f.pd.leg != nil {
		rec.PrefillEndpoint, rec.KVTransfer = s.ids[f.pd.prefill], f.pd.xfer
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
// precedes, and the kernel runs ties in order), and its ticket has ended.
func (s *Sim) recycle(f *flight) {
	s.spare.Put(f)
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
