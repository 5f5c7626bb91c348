package main

import (
	"slices"
	"testing"

	"kvroute/router"
	"kvroute/sweep"
)

func TestEmbeddedDefaultIsValid(t *testing.T) {
	points, err := sweep.Parse(defaultConfig, "default.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 4 || points[0].Fleet.Replicas != 8 || points[0].Reps() != 5 {
		t.Fatalf("default sweep: %d points, %d replicas, %d replications", len(points),
			points[0].Fleet.Replicas, points[0].Reps())
	}
	// The default compares every policy there is.
	var names []string
	for _, p := range points[0].Policies {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if want := router.Builtin().Names(); !slices.Equal(names, want) {
		t.Errorf("default sweep policies %v, want every registered policy %v", names, want)
	}
}
