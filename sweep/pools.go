package sweep

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"

	"kvroute/gpumodel"
	"kvroute/router"
	"kvroute/sim/cluster"
	"kvroute/sim/engine"
	"kvroute/workloads"
)

// The roles of a pool of a fleet split into prefill and decode pools.
const (
	RolePrefill = "prefill"
	RoleDecode  = "decode"
)

// SplitAggregated is fleet.split's value for one aggregated pool (fleet.replicas replicas).
const SplitAggregated = "aggregated"

// PoolConfig is one pool of a fleet split into prefill and decode pools (fleet.pools):
// its role, its replica count, and any replica key that differs from the fleet's.
type PoolConfig struct {
	// Role is prefill or decode.
	Role string `yaml:"role"`
	// Replicas is the pool's replica count, 1..4096.
	Replicas int `yaml:"replicas"`
	// ReplicaConfig is what the pool's replicas run; keys left unset (zero) take the
	// fleet's values.
	ReplicaConfig `yaml:",inline"`
}

// KVTransferConfig is the KV transfer between prefill and decode replicas (fleet.kv_transfer),
// vLLM's NixlConnector over each replica's RDMA NICs.
type KVTransferConfig struct {
	// BandwidthGbps is the NIC bandwidth in Gbit/s per GPU and direction; a replica of TP
	// GPUs reads and writes over TP of them (0: the GPU's NIC in the catalog, nic_gbps: H100 and
	// H200 SXM 400, A100 200, L4 100; 400 where the catalog gives none).
	BandwidthGbps float64 `yaml:"bandwidth_gbps,omitempty"`
	// BaseLatency is the fixed cost of one transfer before its bytes move (default 0).
	BaseLatency time.Duration `yaml:"base_latency,omitempty"`
	// FailurePolicy is vLLM's kv_load_failure_policy for a read that fails (its prefill
	// replica went down): fail (the default: the request fails) or recompute (the decode
	// replica computes the prompt itself).
	FailurePolicy string `yaml:"failure_policy,omitempty"`
	// AbortTimeout is VLLM_NIXL_ABORT_REQUEST_TIMEOUT: how long a prefill replica keeps a
	// finished prefill leg's blocks for a decoder that never reads them (0: 480s).
	AbortTimeout time.Duration `yaml:"abort_timeout,omitempty"`
}

// Failure policies of fleet.kv_transfer.failure_policy.
const (
	FailurePolicyFail      = "fail"
	FailurePolicyRecompute = "recompute"
)

// engine returns the replicas' side of c.
func (c KVTransferConfig) engine() engine.KVTransferConfig {
	return engine.KVTransferConfig{AbortTimeout: c.AbortTimeout, Recompute: c.FailurePolicy == FailurePolicyRecompute}
}

// validate checks c under section ("fleet.kv_transfer").
func (c KVTransferConfig) validate(section string) error {
	var errs []error
	if b := c.BandwidthGbps; !(b >= 0) || math.IsInf(b, 1) {
		errs = append(errs, keyErr(section, "bandwidth_gbps", " %v: want Gbit/s > 0 (0: the GPU's)", b))
	}
	if c.BaseLatency < 0 {
		errs = append(errs, keyErr(section, "base_latency", " %v: want >= 0", c.BaseLatency))
	}
	if p := c.FailurePolicy; p != "" && p != FailurePolicyFail && p != FailurePolicyRecompute {
		errs = append(errs, keyErr(section, "failure_policy", " %q: want fail or recompute", p))
	}
	if c.AbortTimeout < 0 {
		errs = append(errs, keyErr(section, "abort_timeout", " %v: want >= 0 (0: 480s)", c.AbortTimeout))
	}
	return errors.Join(errs...)
}

// Disaggregated reports whether the fleet is split into prefill and decode pools.
func (f FleetConfig) Disaggregated() bool {
	return len(f.Pools) > 0 || f.Split != "" && f.Split != SplitAggregated
}

// Layout returns the fleet's pools, in file order, with every replica key resolved
// (a pool's unset keys take the fleet's), or nil for an aggregated fleet. Errors are
// *KeyError values under section ("fleet").
func (f FleetConfig) Layout(section string) ([]PoolConfig, error) {
	pools := f.Pools
	switch {
	case len(f.Pools) > 0 && f.Split != "":
		return nil, keyErr(section, "split", " and %s.pools: set one", section)
	case f.Split != "":
		var err error
		if pools, err = parseSplit(f.Split, section); err != nil || pools == nil {
			return nil, err
		}
	case len(pools) == 0:
		return nil, nil
	}
	var errs []error
	out := make([]PoolConfig, len(pools))
	prefill, decode := false, false
	for i, p := range pools {
		p.ReplicaConfig = inherit(p.ReplicaConfig, f.ReplicaConfig)
		out[i] = p
		key := fmt.Sprintf("pools[%d]", i)
		switch p.Role {
		case RolePrefill:
			prefill = true
		case RoleDecode:
			decode = true
		default:
			errs = append(errs, keyErr(section, key+".role", " %q: want prefill or decode", p.Role))
		}
		if p.Replicas < 1 || p.Replicas > MaxFleetReplicas {
			errs = append(errs, keyErr(section, key+".replicas", " %d: want 1..%d", p.Replicas, MaxFleetReplicas))
		}
	}
	if !prefill || !decode {
		errs = append(errs, keyErr(section, "pools", ": want a prefill pool and a decode pool at least"))
	}
	return out, errors.Join(errs...)
}

// inherit returns r with each zero field set to the fleet's.
func inherit(r, fleet ReplicaConfig) ReplicaConfig {
	rv, fv := reflect.ValueOf(&r).Elem(), reflect.ValueOf(fleet)
	for i := range rv.NumField() {
		if rv.Field(i).IsZero() {
			rv.Field(i).Set(fv.Field(i))
		}
	}
	return r
}

// splitPool is one term of a split: a count, P or D, and an optional (tpN).
var splitPool = regexp.MustCompile(`^([0-9]+)([PD])(?:\(tp([0-9]+)\))?$`)

// parseSplit reads fleet.split: "aggregated" (nil pools), or terms NP and ND joined by "+",
// each with an optional "(tpK)": "4P+4D", "8P(tp1)+2D(tp4)".
func parseSplit(s, section string) ([]PoolConfig, error) {
	if s == SplitAggregated {
		return nil, nil
	}
	var pools []PoolConfig
	for _, term := range strings.Split(s, "+") {
		m := splitPool.FindStringSubmatch(strings.TrimSpace(term))
		if m == nil {
			return nil, keyErr(section, "split", " %q: want aggregated or pools like 4P+4D or 8P(tp1)+2D(tp4)", s)
		}
		n, _ := strconv.Atoi(m[1])
		p := PoolConfig{Role: RolePrefill, Replicas: n}
		if m[2] == "D" {
			p.Role = RoleDecode
		}
		if m[3] != "" {
			p.TP, _ = strconv.Atoi(m[3])
		}
		pools = append(pools, p)
	}
	return pools, nil
}

// SplitLabel names the fleet's layout for results (the scenario's fleet_split): "aggregated",
// or its pools in order, "4P+4D", with each pool's TP in parentheses when some pool's TP
// differs from another's: "8P(tp1)+2D(tp4)".
func (f FleetConfig) SplitLabel() string {
	pools, err := f.Layout("fleet")
	if err != nil || pools == nil {
		return SplitAggregated
	}
	mixed := false
	for _, p := range pools {
		mixed = mixed || max(p.TP, 1) != max(pools[0].TP, 1)
	}
	var parts []string
	for _, p := range pools {
		s := fmt.Sprintf("%d%s", p.Replicas, strings.ToUpper(p.Role[:1]))
		if mixed {
			s += fmt.Sprintf("(tp%d)", max(p.TP, 1))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "+")
}

// PoolEngines is one resolved pool: its role and its replicas' engine configurations.
type PoolEngines struct {
	Role    string
	Engines []engine.Config
}

// PoolEngines resolves a split fleet's pools against cat, in file order, each
// replica with the fleet's kv_transfer side (nil for an aggregated fleet). Errors are
// *KeyError values under section, joined.
func (f FleetConfig) PoolEngines(cat gpumodel.Catalog, section string) ([]PoolEngines, error) {
	pools, err := f.Layout(section)
	if err != nil || pools == nil {
		return nil, err
	}
	errs := []error{f.KVTransfer.validate(section + ".kv_transfer")}
	var out []PoolEngines
	v0 := false
	for i, p := range pools {
		ec, err := p.ReplicaConfig.Engine(cat, fmt.Sprintf("%s.pools[%d]", section, i))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ec.KVTransfer = f.KVTransfer.engine()
		if ec.Release.V0Scheduler && !v0 {
			v0 = true // one error, though every pool inherits the fleet's release
			errs = append(errs, keyErr(section, "vllm", ": %s has no NIXL connector (V1 only)", ec.Release.Name))
		}
		pe := PoolEngines{Role: p.Role, Engines: make([]engine.Config, p.Replicas)}
		for k := range pe.Engines {
			pe.Engines[k] = ec
		}
		out = append(out, pe)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// jobRouters are a job's policy instances, one per router replica: plain policies for an
// aggregated fleet, P/D policies for a split one.
type jobRouters struct {
	plain []router.Policy
	pd    []router.PDPolicy
}

// routers builds the job's policies. Router replica i seeds its policy with the
// replication's router seed + i: one router is as before. On an aggregated fleet a P/D spec
// runs its decode policy: every request prefills where it decodes.
func (j Job) routers(split bool) (jobRouters, error) {
	var rs jobRouters
	reg := router.Builtin()
	for i := range max(j.Point.Router.Replicas, 1) {
		seed := j.Point.RouterSeedOf(j.Rep) + uint64(i)
		if split {
			p, err := j.Policy.BuildPD(reg, seed)
			if err != nil {
				return rs, err
			}
			rs.pd = append(rs.pd, p)
			continue
		}
		spec := j.Policy
		if spec.PD != nil {
			spec = spec.PD.Decode
		}
		p, err := reg.New(spec.Name, spec.Params, seed)
		if err != nil {
			return rs, err
		}
		rs.plain = append(rs.plain, p)
	}
	return rs, nil
}

// readsText reports whether some policy reads prompt text.
func (rs jobRouters) readsText() bool {
	if len(rs.pd) > 0 {
		return router.ReadsText(rs.pd[0].Prefill) || router.ReadsText(rs.pd[0].Decode)
	}
	return router.ReadsText(rs.plain[0])
}

// sim returns the job's simulation.
func (rs jobRouters) sim(cc cluster.Config, stream *workloads.Stream, sink cluster.Sink) (*cluster.Sim, error) {
	if len(rs.pd) > 0 {
		return cluster.NewPD(cc, rs.pd, stream, sink)
	}
	return cluster.NewRouters(cc, rs.plain, stream, sink)
}

// splitCluster sets c's replicas, their roles and the KV transfer from pools, the point's
// split fleet resolved (FleetConfig.PoolEngines): replica i has the role of the pool it is in.
func (p Point) splitCluster(c *cluster.Config, pools []PoolEngines) {
	for _, pool := range pools {
		role := cluster.RolePrefill
		if pool.Role == RoleDecode {
			role = cluster.RoleDecode
		}
		for _, ec := range pool.Engines {
			c.Replicas = append(c.Replicas, ec)
			c.Roles = append(c.Roles, role)
		}
	}
	kv := p.Fleet.KVTransfer
	c.KVTransfer = cluster.KVTransfer{Gbps: kv.BandwidthGbps, BaseLatency: kv.BaseLatency}
}
