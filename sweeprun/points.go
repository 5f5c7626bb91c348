package sweeprun

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"

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
			if cat, err = loadCatalog(p.Catalog); err != nil {
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

// loadCatalog returns the built-in catalog plus the GPUs and models of the file at path (YAML
// or JSON; gpumodel reads JSON, so YAML is converted first, and the line numbers of a YAML
// file's errors are those of its JSON form: the entry name is what locates them), or the
// built-in one for an empty path.
func loadCatalog(path string) (gpumodel.Catalog, error) {
	if path == "" {
		return gpumodel.DefaultCatalog(), nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return gpumodel.Catalog{}, err
	}
	if ext := strings.ToLower(filepath.Ext(path)); ext == ".yaml" || ext == ".yml" {
		var v any
		if err := yaml.Unmarshal(data, &v); err != nil {
			return gpumodel.Catalog{}, fmt.Errorf("%s: %w", path, err)
		}
		if data, err = json.Marshal(v); err != nil {
			return gpumodel.Catalog{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	return gpumodel.LoadCatalog(bytes.NewReader(data), path)
}
