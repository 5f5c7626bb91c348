package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"kvroute/gpumodel"
	"kvroute/internal/emulate"
	"kvroute/sim/cluster"
	"kvroute/sim/engine"
	"kvroute/sweep"
)

// definePD registers the flags of a disaggregated fleet: the replicas' roles and their side
// of the KV transfer link.
func definePD(fs *flag.FlagSet, o *options) {
	pd := &o.cfg.PD
	fs.StringVar(&pd.Role, "role", "", "every replica's role: prefill (serves NIXL prefill legs only) or decode (reads a decode leg's KV first); empty: aggregated")
	fs.IntVar(&o.prefillReplicas, "prefill-replicas", 0, "the first N replicas serve prefill legs, the others decode legs (0: -role for all)")
	fs.Float64Var(&pd.BandwidthGbps, "kv-transfer-bandwidth-gbps", 0, "KV transfer link per GPU in Gbit/s; a replica reads over its TP GPUs' links (fleet.kv_transfer.bandwidth_gbps; 0: the GPU's NIC in the catalog)")
	fs.DurationVar(&pd.BaseLatency, "kv-transfer-base-latency", 0, "latency added to every KV transfer (fleet.kv_transfer.base_latency)")
	fs.DurationVar(&pd.AbortTimeout, "kv-transfer-abort-timeout", 0, "how long a prefill leg's blocks stay held when no decoder reads them (fleet.kv_transfer.abort_timeout, VLLM_NIXL_ABORT_REQUEST_TIMEOUT; 0: 480s)")
	fs.StringVar(&pd.FailurePolicy, "kv-transfer-failure-policy", "", "vLLM's kv_load_failure_policy, fail or recompute (fleet.kv_transfer.failure_policy; empty: fail)")
}

// checkPD checks the role flags against the replica count.
func (o options) checkPD() error {
	switch {
	case o.prefillReplicas < 0 || o.prefillReplicas >= max(o.replicas, 1):
		return fmt.Errorf("-prefill-replicas %d: want 0..%d, leaving a decode replica", o.prefillReplicas, o.replicas-1)
	case o.prefillReplicas > 0 && o.cfg.PD.Role != "":
		return errors.New("-prefill-replicas and -role are exclusive")
	}
	return nil
}

// poolReplica is one replica of a split fleet: its pool's role and its engine configuration.
type poolReplica struct {
	role   string
	engine engine.Config
}

// role is replica i's role.
func (o options) role(i int) string {
	switch {
	case o.pooled != nil:
		return o.pooled[i].role
	case o.prefillReplicas == 0:
		return o.cfg.PD.Role
	case i < o.prefillReplicas:
		return emulate.RolePrefill
	}
	return emulate.RoleDecode
}

// pdRoles is cmd/route's -pd-roles for the replicas, empty when they are aggregated.
func (o options) pdRoles() string {
	var roles []string
	for i := range o.replicas {
		if r := o.role(i); r != "" {
			roles = append(roles, cluster.EndpointID(i)+"="+r)
		}
	}
	return strings.Join(roles, ",")
}

// poolEngine is replica i's engine configuration in a split fleet, nil otherwise.
func (o options) poolEngine(i int) *engine.Config {
	if o.pooled == nil {
		return nil
	}
	return &o.pooled[i].engine
}

// resolvePools resolves a split fleet file (fleet.pools or fleet.split) into o: the pools'
// replicas, each with its pool's role and replica keys, and fleet.kv_transfer's link where
// no -kv-transfer flag overrides it.
func (o *options) resolvePools(fs *flag.FlagSet, fl sweep.FleetConfig, cat gpumodel.Catalog) error {
	if isSet(fs, "role") || isSet(fs, "prefill-replicas") || isSet(fs, "replicas") {
		return errors.New("-fleet: the file splits the fleet into pools: -role, -prefill-replicas and -replicas do not apply")
	}
	pools, err := fl.PoolEngines(cat, "fleet")
	if err != nil {
		return err
	}
	o.pooled = nil
	for _, p := range pools {
		for _, ec := range p.Engines {
			o.pooled = append(o.pooled, poolReplica{role: p.Role, engine: ec})
		}
	}
	o.replicas = len(o.pooled)
	pd, kt := &o.cfg.PD, fl.KVTransfer
	for name, apply := range map[string]func(){
		"kv-transfer-bandwidth-gbps": func() { pd.BandwidthGbps = kt.BandwidthGbps },
		"kv-transfer-base-latency":   func() { pd.BaseLatency = kt.BaseLatency },
		"kv-transfer-abort-timeout":  func() { pd.AbortTimeout = kt.AbortTimeout },
		"kv-transfer-failure-policy": func() { pd.FailurePolicy = kt.FailurePolicy },
	} {
		if !isSet(fs, name) {
			apply()
		}
	}
	first := pools[0].Engines[0]
	r := fl.ReplicaConfig
	o.cfg.GPU, o.cfg.Model, o.cfg.TP, o.cfg.VLLM = first.Deployment.GPU.Name, r.Model, first.Deployment.TP, r.VLLM
	o.cfg.Deployment, o.cfg.Offload = &first.Deployment, first.Offload
	return nil
}
