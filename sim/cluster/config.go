package cluster

import (
	"errors"
	"fmt"
	"time"

	"kvroute/router"
	"kvroute/sim/engine"
)

// Config describes a simulated fleet and its router's view of it.
type Config struct {
	// Replicas are the replicas of the fleet, in endpoint order.
	Replicas []engine.Config
	// Model is the model name every replica serves and every request asks for.
	Model string
	// MetricsInterval is how often the router scrapes replicas' metrics; 0 means the router
	// sees them exactly at every decision.
	MetricsInterval time.Duration
	// NetworkDelay is the one-way router↔replica latency, added to request delivery and to
	// the first token and completion as the client sees them.
	NetworkDelay time.Duration
	// MaxRetries is how often a request aborted by a replica failure is re-routed; 0: never,
	// as a router's max_retries: 0 (sweep files and cmd/route default to DefaultMaxRetries).
	MaxRetries int
	// Failures take replicas down and back up.
	Failures []Failure
	// Routers models several router replicas in front of the fleet (zero value: one).
	Routers Routers
	// Roles, when set, splits the fleet into prefill and decode pools: Roles[i] is replica
	// i's (pd.go; NewPD runs such a fleet). Nil: one aggregated pool.
	Roles []Role
	// KVTransfer prices a split fleet's KV transfers.
	KVTransfer KVTransfer
}

// Routers describes N router replicas, each with its own policy state and its own in-flight
// counters; scraped metrics and health are the same for all. Approximate policies learn only
// from the requests that reach them; policies that read KV events each receive every
// replica's events (as every llm-d scheduler replica subscribes to every pod), EventDelay
// after the engine's change.
type Routers struct {
	// Count is the number of router replicas (0 or 1: one).
	Count int
	// Assign is how a request picks its router: AssignRandom (a hash of the request id:
	// uniform and independent of the request) or AssignAffinity (a hash of its session, or
	// tenant, so a conversation always reaches the same router, as with client-IP affinity).
	Assign string
	// EventDelay is the time from a cache change in an engine to its KV event reaching the
	// routers (publishing, network, decoding); 0: at once.
	EventDelay time.Duration
}

// Ways a request is assigned to a router replica.
const (
	AssignRandom   = "random"
	AssignAffinity = "affinity"
)

func (r Routers) count() int { return max(r.Count, 1) }

// Failure takes replica Replica down at At and back up at RecoverAt (0: never).
type Failure struct {
	Replica   int
	At        time.Duration
	RecoverAt time.Duration
}

// DefaultMaxRetries is the retries a sweep file's router gets unless it sets max_retries, as
// cmd/route's limits.max_retries.
const DefaultMaxRetries = router.DefaultMaxRetries

// DefaultMetricsInterval is the scrape period of the Gateway API Inference Extension and
// AIBrix (50 ms).
const DefaultMetricsInterval = 50 * time.Millisecond

// Validate checks the configuration.
func (c Config) Validate() error {
	var errs []error
	if len(c.Replicas) == 0 {
		errs = append(errs, errors.New("cluster: no replicas"))
	}
	if c.MetricsInterval < 0 || c.NetworkDelay < 0 || c.MaxRetries < 0 {
		errs = append(errs, fmt.Errorf("cluster: metrics_interval %v, network_delay %v, max_retries %d: want >= 0",
			c.MetricsInterval, c.NetworkDelay, c.MaxRetries))
	}
	if c.Routers.Count < 0 || c.Routers.EventDelay < 0 {
		errs = append(errs, fmt.Errorf("cluster: routers.count %d, routers.event_delay %v: want >= 0", c.Routers.Count, c.Routers.EventDelay))
	}
	if a := c.Routers.Assign; a != "" && a != AssignRandom && a != AssignAffinity {
		errs = append(errs, fmt.Errorf("cluster: routers.assign %q: want %q or %q", a, AssignRandom, AssignAffinity))
	}
	for i, f := range c.Failures {
		if f.Replica < 0 || f.Replica >= len(c.Replicas) {
			errs = append(errs, fmt.Errorf("cluster: failure %d: replica %d not in 0..%d", i, f.Replica, len(c.Replicas)-1))
		}
		if f.At < 0 || (f.RecoverAt != 0 && f.RecoverAt <= f.At) {
			errs = append(errs, fmt.Errorf("cluster: failure %d: at %v, recover_at %v: want 0 <= at < recover_at", i, f.At, f.RecoverAt))
		}
	}
	if err := c.validatePD(); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
