package sweep

import (
	"errors"
	"fmt"

	"kvroute/router"
	"kvroute/sim/cluster"
	"kvroute/sim/engine"
)

// validate checks a point: what every sweep needs, then fleet, router and policies.
func (p Point) validate() error {
	var errs []error
	if err := p.Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := p.fleet(); err != nil {
		errs = append(errs, err)
	}
	if p.Router.MetricsInterval < 0 || p.Router.NetworkDelay < 0 || (p.Router.MaxRetries != nil && *p.Router.MaxRetries < 0) {
		errs = append(errs, errors.New("router: metrics_interval, network_delay and max_retries must be >= 0"))
	}
	if len(p.Policies) == 0 {
		errs = append(errs, errors.New("policies: at least one"))
	}
	reg := router.Builtin()
	for i, ps := range p.Policies {
		if err := ps.Check(reg); err != nil {
			errs = append(errs, fmt.Errorf("policies[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// fleet builds the replicas' engine configurations (FleetConfig.Engines); an error
// about a key the file sets names the key's line.
func (p Point) fleet() ([]engine.Config, error) {
	reps, err := p.Fleet.Engines(p.cat, "fleet")
	return reps, p.lined(err)
}

// lined returns err, the joined errors of resolving the fleet, with each *KeyError about a
// key the file sets prefixed by the key's line (nil for nil).
func (p Point) lined(err error) error {
	if err == nil {
		return nil
	}
	var errs []error
	for _, e := range unjoin(err) {
		var ke *KeyError
		if errors.As(e, &ke) && p.Line(ke.Key) > 0 {
			e = fmt.Errorf("line %d: %w", p.Line(ke.Key), e)
		}
		errs = append(errs, e)
	}
	return errors.Join(errs...)
}

// unjoin returns the errors err joins, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}

// release is the vLLM release the point's engines follow (fleet.vllm, default the newest).
func (p Point) release() (engine.Release, error) {
	return engine.ParseRelease(p.Fleet.VLLM)
}

// clusterConfig is the point's cluster configuration. A split fleet is resolved once
// (FleetConfig.PoolEngines), into its replicas and their roles together.
func (p Point) clusterConfig() (cluster.Config, error) {
	c := cluster.Config{
		Model: p.Fleet.Model, MetricsInterval: p.Router.MetricsInterval,
		NetworkDelay: p.Router.NetworkDelay, MaxRetries: cluster.DefaultMaxRetries,
	}
	if p.Fleet.Disaggregated() {
		pools, err := p.Fleet.PoolEngines(p.cat, "fleet")
		if err != nil {
			return cluster.Config{}, p.lined(err)
		}
		p.splitCluster(&c, pools)
	} else {
		reps, err := p.fleet()
		if err != nil {
			return cluster.Config{}, err
		}
		c.Replicas = reps
	}
	if p.Router.MaxRetries != nil {
		c.MaxRetries = *p.Router.MaxRetries
	}
	for _, f := range p.Failures {
		c.Failures = append(c.Failures, cluster.Failure{Replica: f.Replica, At: f.At, RecoverAt: f.RecoverAt})
	}
	c.Routers = cluster.Routers{Count: p.Router.Replicas, Assign: p.Router.Assign, EventDelay: p.Router.EventDelay}
	return c, c.Validate()
}
