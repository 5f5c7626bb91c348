package sweep

import (
	"errors"
	"fmt"

	"kvroute/gpumodel"
)

// Parse reads a sweep file (Expand) and checks that every point can be simulated against its
// GPU and model catalog: its fleet, workload, router, policies and SLO. name labels errors.
func Parse(data []byte, name string) ([]Point, error) {
	pts, err := Expand(data, name)
	if err != nil {
		return nil, err
	}
	points := make([]Point, len(pts))
	var errs []error
	cats := map[string]gpumodel.Catalog{}
	for i, p := range pts {
		cat, ok := cats[p.Catalog]
		if !ok {
			if cat, err = LoadCatalog(p.Catalog); err != nil {
				return nil, fmt.Errorf("%s: catalog: %w", name, err)
			}
			cats[p.Catalog] = cat
		}
		p.cat = cat
		points[i] = p
		if err := points[i].validate(); err != nil && len(errs) < 5 {
			errs = append(errs, fmt.Errorf("%s: %s: %w", name, p.Label(), err))
		}
	}
	return points, errors.Join(errs...)
}
