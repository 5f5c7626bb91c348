package main

import (
	"errors"
	"fmt"

	"kvroute/gpumodel"
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
	if p.Router.MetricsInterval < 0 || p.Router.NetworkDelay < 0 || p.Router.MaxRetries < 0 {
		errs = append(errs, errors.New("router: metrics_interval, network_delay and max_retries must be >= 0"))
	}
	if len(p.Policies) == 0 {
		errs = append(errs, errors.New("policies: at least one"))
	}
	reg := router.Builtin()
	for i, ps := range p.Policies {
		if _, err := reg.New(ps.Name, ps.Params, 1); err != nil {
			errs = append(errs, fmt.Errorf("policies[%d]: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// fleet builds the replicas' engine configurations.
func (p Point) fleet() ([]engine.Config, error) {
	f := p.Fleet
	var errs []error
	g, err := p.cat.GPU(f.GPU)
	if err != nil {
		errs = append(errs, fmt.Errorf("fleet.gpu: %w", err))
	}
	m, err := p.cat.Model(f.Model)
	if err != nil {
		errs = append(errs, fmt.Errorf("fleet.model: %w", err))
	}
	if f.Replicas < 1 || f.Replicas > 4096 {
		errs = append(errs, fmt.Errorf("fleet.replicas %d: want 1..4096", f.Replicas))
	}
	tp := max(f.TP, 1)
	if f.TP < 0 || f.NumBlocks < 0 || f.MemoryUtilization < 0 || f.MemoryUtilization > 1 {
		errs = append(errs, errors.New("fleet: tp, num_blocks >= 0 and gpu_memory_utilization in 0..1"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	d := gpumodel.DefaultDeployment(g, m, tp)
	if f.MemoryUtilization > 0 {
		d.MemoryUtilization = f.MemoryUtilization
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	if f.NumBlocks == 0 && d.KVBlocks() <= 0 {
		return nil, fmt.Errorf("fleet: %s on %d× %s leaves no memory for the KV cache", m.Name, tp, g.Name)
	}
	out := make([]engine.Config, f.Replicas)
	for i := range out {
		out[i] = engine.Config{Deployment: d, NumBlocks: f.NumBlocks}
	}
	return out, nil
}

// clusterConfig is the point's cluster configuration.
func (p Point) clusterConfig() (cluster.Config, error) {
	reps, err := p.fleet()
	if err != nil {
		return cluster.Config{}, err
	}
	c := cluster.Config{
		Replicas: reps, Model: p.Fleet.Model, MetricsInterval: p.Router.MetricsInterval,
		NetworkDelay: p.Router.NetworkDelay, MaxRetries: p.Router.MaxRetries,
	}
	for _, f := range p.Failures {
		c.Failures = append(c.Failures, cluster.Failure{Replica: f.Replica, At: f.At, RecoverAt: f.RecoverAt})
	}
	return c, c.Validate()
}
