package sweeprun

import (
	"errors"
	"fmt"

	"kvroute/gpumodel"
	"kvroute/internal/sweep"
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
	d, err := deployment(f, g, m, tp)
	if err != nil {
		return nil, err
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	if f.NumBlocks == 0 && d.KVBlocks() <= 0 {
		return nil, fmt.Errorf("fleet: %s on %d× %s leaves no memory for the KV cache", m.Name, tp, g.Name)
	}
	rel, err := p.release()
	if err != nil {
		return nil, err
	}
	if err := v0Args(p, rel); err != nil {
		return nil, err
	}
	out := make([]engine.Config, f.Replicas)
	for i := range out {
		out[i] = engine.Config{Deployment: d, NumBlocks: f.NumBlocks, Release: rel, SchedulerSteps: f.NumSchedulerSteps}
	}
	return out, nil
}

// release is the vLLM release the point's engines follow (fleet.vllm, default the newest).
func (p Point) release() (engine.Release, error) {
	rel, err := engine.ParseRelease(p.Fleet.VLLM)
	if err != nil {
		if line := p.Line("fleet.vllm"); line > 0 {
			return rel, fmt.Errorf("line %d: fleet.vllm: %w", line, err)
		}
		return rel, fmt.Errorf("fleet.vllm: %w", err)
	}
	return rel, nil
}

// v0Args checks the engine arguments that only V0 takes or that V0 needs set:
// num_scheduler_steps above 1 is V0's, and V0 needs max_num_batched_tokens from the file,
// since its own default without chunked prefill, max(max_model_len, 2048), depends on a
// max_model_len the simulator does not model (the V1 default would silently reject every
// prompt longer than it).
func v0Args(p Point, rel engine.Release) error {
	f := p.Fleet
	err := rel.CheckSchedulerSteps(f.NumSchedulerSteps)
	switch {
	case err != nil:
		err = fmt.Errorf("fleet.%w", err)
		if line := p.Line("fleet.num_scheduler_steps"); line > 0 {
			err = fmt.Errorf("line %d: %w", line, err)
		}
	case rel.V0Scheduler && f.MaxNumBatchedTokens == 0:
		err = fmt.Errorf("fleet.vllm %s needs fleet.max_num_batched_tokens: V0 without chunked prefill "+
			"defaults it to max(max_model_len, 2048) and ignores longer prompts; set it as your engine runs", rel.Name)
		if line := p.Line("fleet.vllm"); line > 0 {
			err = fmt.Errorf("line %d: %w", line, err)
		}
	}
	return err
}

// deployment is vLLM's replica of m on tp GPUs g with the fleet's engine arguments applied
// (gpumodel.EngineArgs); each error names its sweep key.
func deployment(f sweep.FleetConfig, g gpumodel.GPU, m gpumodel.Model, tp int) (gpumodel.Deployment, error) {
	d, err := gpumodel.EngineArgs{
		GPUMemoryUtilization: f.MemoryUtilization, Quantization: f.Quantization, KVCacheDType: f.KVCacheDType,
		MaxNumBatchedTokens: f.MaxNumBatchedTokens, MaxNumSeqs: f.MaxNumSeqs,
	}.Deployment(g, m, tp)
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		var errs []error
		for _, e := range joined.Unwrap() {
			errs = append(errs, fmt.Errorf("fleet.%w", e))
		}
		return d, errors.Join(errs...)
	}
	return d, err
}

// clusterConfig is the point's cluster configuration.
func (p Point) clusterConfig() (cluster.Config, error) {
	reps, err := p.fleet()
	if err != nil {
		return cluster.Config{}, err
	}
	c := cluster.Config{
		Replicas: reps, Model: p.Fleet.Model, MetricsInterval: p.Router.MetricsInterval,
		NetworkDelay: p.Router.NetworkDelay, MaxRetries: cluster.DefaultMaxRetries,
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
