package main

import (
	"errors"
	"fmt"

	"kvroute/internal/sweep"
)

// Point is one scenario of a sweep, with what the simulator needs beyond the file.
type Point struct{ sweep.Point }

// Parse reads a sweep file (see package sweep) and checks every point can be simulated: its
// fleet, workload, router, policies and SLO. name labels errors.
func Parse(data []byte, name string) ([]Point, error) {
	pts, err := sweep.Parse(data, name)
	if err != nil {
		return nil, err
	}
	points := make([]Point, len(pts))
	var errs []error
	for i, p := range pts {
		points[i] = Point{p}
		if err := points[i].validate(); err != nil && len(errs) < 5 {
			errs = append(errs, fmt.Errorf("%s: %s: %w", name, p.Label(), err))
		}
	}
	return points, errors.Join(errs...)
}
