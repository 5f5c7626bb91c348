package cluster

import (
	"kvroute/router"
	"kvroute/sim"
)

// FailureThreshold is how many consecutive failed scrapes of a replica make the routers eject
// it, as cmd/route's health.failure_threshold defaults to. A router also ejects a replica at
// once when a request it sends there is refused (nobody listens), as cmd/route does.
const FailureThreshold = 3

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

// scrape reads each replica's metrics into every router's view. A replica that is down
// answers no scrape: its last metrics stay, and the routers eject it after FailureThreshold
// failed scrapes in a row; a good scrape re-admits it.
func (s *Sim) scrape(now sim.Time) {
	s.scraped = s.scraped[:0]
	for i, rep := range s.reps {
		s.scraped = append(s.scraped, rep.Metrics())
		switch {
		case !rep.Down():
			s.failedScrapes[i] = 0
			if s.ejected[i] {
				s.ejected[i] = false
				s.eachRouter(func(lc *router.Lifecycle) { lc.Readmit(s.ids[i]) })
			}
		case s.failedScrapes[i] < FailureThreshold:
			s.failedScrapes[i]++
			if s.failedScrapes[i] == FailureThreshold {
				s.ejected[i] = true
				s.eachRouter(func(lc *router.Lifecycle) { lc.Eject(s.ids[i]) })
			}
		}
	}
	s.scrapedAt = s.wall(now)
	for _, ri := range s.rt {
		if ri.pre != nil {
			ri.pre.lc.Update(ri.pre.scrape)
		}
		ri.lc.Update(ri.scrape)
	}
}

// applyScrape sets the scraped fields of a lifecycle's endpoints from the last scrape
// (eps[j] is replica idx[j]), leaving the last good values of a replica that is down.
func (s *Sim) applyScrape(idx []int, eps []router.EndpointState) {
	for j, i := range idx {
		if s.reps[i].Down() {
			continue
		}
		m, e := s.scraped[i], &eps[j]
		e.Running, e.Waiting, e.KVUsage, e.NumGPUBlocks, e.UpdatedAt = m.Running, m.Waiting, m.KVUsage, m.NumGPUBlocks, s.scrapedAt
	}
}

// scraper returns the function that applies the last scrape to a lifecycle over replicas idx.
func (s *Sim) scraper(idx []int) func([]router.EndpointState) {
	return func(eps []router.EndpointState) { s.applyScrape(idx, eps) }
}

func (s *Sim) eachRouter(fn func(*router.Lifecycle)) {
	for _, ri := range s.rt {
		fn(ri.lc)
		if ri.pre != nil {
			fn(ri.pre.lc)
		}
	}
}

// fail stops replica i: the requests it holds are aborted, and the routers learn of it from
// their scrapes or from a refused request, as a live router does.
func (s *Sim) fail(i int) {
	s.reps[i].Fail()
}

// recover restarts replica i, empty; the routers re-admit it at their next scrape.
func (s *Sim) recover(i int) { s.reps[i].Recover() }
