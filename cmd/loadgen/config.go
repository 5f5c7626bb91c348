package main

import (
	"errors"
	"fmt"
	"strings"

	"kvroute/sweep"
)

// Point is one load level (or other workload variant) of a sweep file. The file is
// cmd/simulate's (package sweep): workload, arrival, requests, duration and seed drive the
// load; fleet, router and failures describe the simulated fleet and are only recorded, since
// the live target is what it is; policies name the run (the target decides the routing).
type Point struct{ sweep.Point }

// Label names the point by its load axes ("base" when nothing is swept): the simulator's
// points that differ only in fleet or router are one live run.
func (p Point) Label() string { return p.LoadKey() }

// group names the runs plotted together, as cmd/simulate does: the point without its rate.
func (p Point) group() string {
	var parts []string
	for _, kv := range strings.Split(p.LoadKey(), ",") {
		if kv != "base" && !strings.HasPrefix(kv, "rate=") {
			parts = append(parts, kv)
		}
	}
	if len(parts) == 0 {
		return p.Name
	}
	return p.Name + " " + strings.Join(parts, ",")
}

// model is fleet.model, or "" when the file names none.
func (p Point) model() string { return p.Fleet.Model }

// Parse reads a sweep file strictly (package sweep) and keeps one point per load: lists
// under fleet and router are simulator axes, recorded but not multiplying the runs. name
// labels errors.
func Parse(data []byte, name string) ([]Point, error) {
	pts, err := sweep.Expand(data, name)
	if err != nil {
		return nil, err
	}
	var points []Point
	seen := map[string]bool{}
	var errs []error
	for _, sp := range pts {
		p := Point{sp}
		if seen[p.Label()] {
			continue
		}
		seen[p.Label()] = true
		if err := p.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", name, p.Label(), err))
		}
		points = append(points, p)
	}
	return points, errors.Join(errs...)
}
