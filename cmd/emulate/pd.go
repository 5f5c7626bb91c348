package main

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"kvroute/internal/emulate"
	"kvroute/sim/cluster"
)

// definePD registers the flags of a disaggregated fleet: the replicas' roles and their side
// of the KV transfer link.
func definePD(fs *flag.FlagSet, o *options) {
	pd := &o.cfg.PD
	fs.StringVar(&pd.Role, "role", "", "every replica's role: prefill (serves NIXL prefill legs only) or decode (reads a decode leg's KV first); empty: aggregated")
	fs.IntVar(&o.prefillReplicas, "prefill-replicas", 0, "the first N replicas serve prefill legs, the others decode legs (0: -role for all)")
	fs.Float64Var(&pd.BandwidthGbps, "kv-transfer-bandwidth-gbps", 0, "each replica's KV transfer link in Gbit/s (fleet.kv_transfer.bandwidth_gbps; 0: 400)")
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

// role is replica i's role.
func (o options) role(i int) string {
	if o.prefillReplicas == 0 {
		return o.cfg.PD.Role
	}
	if i < o.prefillReplicas {
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
