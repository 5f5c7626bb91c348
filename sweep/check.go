package sweeprun

import (
	"errors"
	"fmt"

	"kvroute/gpumodel"
	"kvroute/internal/sweep"
)

// Point is one scenario of a sweep, with what the simulator needs beyond the file: the GPU
// and model catalog its fleet is looked up in.
type Point struct {
	sweep.Point
	cat gpumodel.Catalog
}

// Parse reads a sweep file (see package sweep) and checks every point can be simulated: its
// fleet, workload, router, policies and SLO. name labels errors.
func Parse(data []byte, name string) ([]Point, error) {
	pts, err := sweep.Parse(data, name)
	if err != nil {
		return nil, err
	}
	points := make([]Point, len(pts))
	var errs []error
	cats := map[string]gpumodel.Catalog{}
	for i, p := range pts {
		cat, ok := cats[p.Catalog]
		if !ok {
			if cat, err = sweep.LoadCatalog(p.Catalog); err != nil {
				return nil, fmt.Errorf("%s: catalog: %w", name, err)
			}
			cats[p.Catalog] = cat
		}
		points[i] = Point{p, cat}
		if err := points[i].validate(); err != nil && len(errs) < 5 {
			errs = append(errs, fmt.Errorf("%s: %s: %w", name, p.Label(), err))
		}
	}
	return points, errors.Join(errs...)
}
