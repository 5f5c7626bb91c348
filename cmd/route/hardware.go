package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"kvroute/gpumodel"
	"kvroute/router"
	"kvroute/sweep"
)

// prefillPredictors builds, for each entry of hardware (keyed by backend name or URL), the
// backend's step-time model from the replica the entry describes, resolved in cat as the
// simulator resolves a fleet (sweep.ReplicaConfig.Engine), so a backend is priced live as
// the simulator prices its replicas. Bad values and a key that names no backend are errors
// naming the entry and its key (hardware.NAME.gpu).
func prefillPredictors(cat gpumodel.Catalog, hardware map[string]sweep.ReplicaConfig, backends []string) (map[string]router.PrefillPredictor, error) {
	if len(hardware) == 0 {
		return nil, nil
	}
	known := map[string]bool{}
	for _, b := range backends {
		if name, u, ok := strings.Cut(b, "="); ok {
			known[name], known[strings.TrimRight(u, "/")] = true, true
		} else {
			known[strings.TrimRight(b, "/")] = true
		}
	}
	keys := make([]string, 0, len(hardware))
	for k := range hardware {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]router.PrefillPredictor, len(hardware))
	var errs []error
	for _, k := range keys {
		if !known[strings.TrimRight(k, "/")] {
			errs = append(errs, fmt.Errorf("route: hardware.%s: no backend has that name or URL", k))
			continue
		}
		ec, err := hardware[k].Engine(cat, "hardware."+k)
		if err != nil {
			errs = append(errs, fmt.Errorf("route: %w", err))
			continue
		}
		p, err := gpumodel.NewPrefillPredictor(ec.Deployment)
		if err != nil {
			errs = append(errs, fmt.Errorf("route: hardware.%s: %w", k, err))
			continue
		}
		out[strings.TrimRight(k, "/")] = p
	}
	return out, errors.Join(errs...)
}
