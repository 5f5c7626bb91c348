package report

import (
	"bytes"
	"image/png"
	"math"
	"strings"
	"testing"
)

func TestObjectiveMapPNG(t *testing.T) {
	pts := []MapPoint{{1, 1, 500}, {2, 10, 700}, {3, 100, 900}, {math.NaN(), 1, 1}, {1, 2, math.Inf(1)}}
	cases := []struct {
		name    string
		m       ObjectiveMap
		wantErr bool
	}{
		{"log axis, lower is better", ObjectiveMap{Title: "t", X: "a", Y: "b", Z: "p99", YLog: true, ZLog: true, LowerIsBetter: true, Points: pts,
			Marks: []MapMark{{"defaults", 1, 1}, {"tuned", 2, 10}}}, false},
		{"higher is better", ObjectiveMap{Points: pts}, false},
		{"one value", ObjectiveMap{Points: []MapPoint{{1, 1, 3}}}, false},
		{"nothing finite", ObjectiveMap{Points: []MapPoint{{1, 1, math.NaN()}}}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			a, err := ObjectiveMapPNG(tc.m)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if _, err := png.Decode(bytes.NewReader(a)); err != nil {
				t.Fatalf("not a PNG: %v", err)
			}
			b, _ := ObjectiveMapPNG(tc.m)
			if !bytes.Equal(a, b) {
				t.Error("the same map gave different bytes")
			}
		})
	}
}

func TestPowTicks(t *testing.T) {
	cases := []struct {
		name     string
		min, max float64
		want     []string // labelled values
	}{
		{"two decades", 2, 4, []string{"100", "200", "500", "1000", "2000", "5000", "10000"}},
		{"narrow: the default ticks, relabelled", math.Log10(600), math.Log10(700), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, tk := range (powTicks{}).Ticks(tc.min, tc.max) {
				if tk.Label != "" {
					got = append(got, tk.Label)
				}
			}
			if len(got) < 2 {
				t.Fatalf("labels %v: want at least two", got)
			}
			if tc.want != nil && strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("labels %v, want %v", got, tc.want)
			}
		})
	}
}
