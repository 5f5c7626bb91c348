package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"

	"kvroute/gpumodel"
	"kvroute/router"
)

// hardwareSpec is what a backend runs on: the step-time model predicted-ttft prices prefill
// with (gpumodel's catalog names; tp defaults to 1). The engine settings are vLLM's defaults
// for that GPU (gpumodel.DefaultDeployment).
type hardwareSpec struct {
	GPU   string `yaml:"gpu"`
	Model string `yaml:"model"`
	TP    int    `yaml:"tp"`
}

// prefillPredictors builds, for each entry of hardware (keyed by backend name or URL), the
// backend's step-time model. Unknown GPUs or models, a key that names no backend, and a
// tensor-parallel size below 1 are errors naming the entry.
func prefillPredictors(hardware map[string]hardwareSpec, backends []string) (map[string]router.PrefillPredictor, error) {
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
		p, err := predictorFor(hardware[k])
		switch {
		case !known[strings.TrimRight(k, "/")]:
			errs = append(errs, fmt.Errorf("route: hardware.%s: no backend has that name or URL", k))
		case err != nil:
			errs = append(errs, fmt.Errorf("route: hardware.%s: %w", k, err))
		default:
			out[strings.TrimRight(k, "/")] = p
		}
	}
	return out, errors.Join(errs...)
}

func predictorFor(h hardwareSpec) (*gpumodel.PrefillPredictor, error) {
	g, err := gpumodel.LookupGPU(h.GPU)
	if err != nil {
		return nil, fmt.Errorf("gpu: %w", err)
	}
	m, err := gpumodel.LookupModel(h.Model)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	tp := h.TP
	if tp == 0 {
		tp = 1
	}
	if tp < 1 {
		return nil, fmt.Errorf("tp %d: want >= 1", h.TP)
	}
	return gpumodel.NewPrefillPredictor(gpumodel.DefaultDeployment(g, m, tp))
}
