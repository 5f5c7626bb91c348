package router_test

import (
	"strings"
	"testing"

	"kvroute/router"
)

// Every decider is listed in name order with what it reproduces and how it decides, and
// builds from its name alone.
func TestDeciderInfos(t *testing.T) {
	names := router.DeciderNames()
	if got, want := strings.Join(names, ","), "always,never,prefix-based,token-cap"; got != want {
		t.Fatalf("DeciderNames() = %s, want %s", got, want)
	}
	infos := router.DeciderInfos()
	if len(infos) != len(names) {
		t.Fatalf("DeciderInfos() has %d entries, DeciderNames() %d", len(infos), len(names))
	}
	for i, info := range infos {
		if info.Name != names[i] || info.Source == "" || info.Rule == "" {
			t.Errorf("DeciderInfos()[%d] = %+v: want name %q with a source and a rule", i, info, names[i])
		}
		if d, err := router.NewDecider(info.Name, nil); err != nil || d.Name() != info.Name {
			t.Errorf("NewDecider(%s) = %v, %v", info.Name, d, err)
		}
	}
}

func TestNewDeciderErrors(t *testing.T) {
	for _, tc := range []struct {
		name, decider string
		params        map[string]any
		wantErr       string
	}{
		{"unknown decider", "no-such-decider", nil, `router: unknown decider "no-such-decider" (known: [always never prefix-based token-cap])`},
		{"unknown field", "prefix-based", map[string]any{"non_cached": 1}, `router: decider prefix-based: router: params: json: unknown field "non_cached"`},
		{"invalid value", "token-cap", map[string]any{"bypass_below_tokens": -1}, "router: decider token-cap: bypass_below_tokens -1: want >= 0"},
		{"parameters of a decider without any", "always", map[string]any{"x": 1}, `unknown field "x"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := router.NewDecider(tc.decider, tc.params)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("NewDecider(%s, %v): err = %v, want it to contain %q", tc.decider, tc.params, err, tc.wantErr)
			}
		})
	}
}
