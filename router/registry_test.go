package router_test

import (
	"encoding/json"
	"errors"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"kvroute/router"
)

func TestRegistryRejectsDuplicates(t *testing.T) {
	reg := router.NewRegistry()
	f := func(map[string]any, *rand.Rand) (router.Policy, error) { return nil, nil }
	if err := reg.Register("x", f); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register("x", f); !errors.Is(err, router.ErrDuplicatePolicy) {
		t.Fatalf("second Register: err = %v, want ErrDuplicatePolicy", err)
	}
}

func TestRegistryNew(t *testing.T) {
	reg := router.Builtin()
	cases := []struct {
		name    string
		policy  string
		params  map[string]any
		wantErr string
	}{
		{"defaults", "chwbl", nil, ""},
		{"override", "chwbl", map[string]any{"load_factor": 2.0}, ""},
		{"unknown policy", "no-such-policy", nil, "unknown policy"},
		{"unknown field", "chwbl", map[string]any{"load_facter": 2.0}, `unknown field "load_facter"`},
		{"wrong type", "chwbl", map[string]any{"load_factor": "high"}, "load_factor"},
		{"invalid value", "chwbl", map[string]any{"load_factor": 0.5}, "load_factor 0.5"},
		{"duration string", "vtc-basic", map[string]any{"window": "10m"}, ""},
		{"bad duration", "vtc-basic", map[string]any{"window": "ten"}, "duration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := reg.New(tc.policy, tc.params, 1)
			if tc.wantErr == "" {
				if err != nil || p == nil || p.Name() != tc.policy {
					t.Fatalf("New(%s) = %v, %v", tc.policy, p, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New(%s, %v): err = %v, want it to mention %q", tc.policy, tc.params, err, tc.wantErr)
			}
		})
	}
}

func TestBuiltinNames(t *testing.T) {
	want := []string{
		"cache-aware", "chwbl", "kv-router", "least-kv-cache", "least-request", "lmetric", "power-of-two",
		"precise-prefix", "predicted-ttft", "prefix-cache", "prefix-score", "prefix-tree", "random",
		"round-robin", "session-affinity", "token-load", "vtc-basic",
	}
	got := router.Builtin().Names()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("Builtin().Names() = %v, want %v", got, want)
	}
}

// Every built-in policy says what it reproduces and how it decides, for the listings.
func TestBuiltinInfo(t *testing.T) {
	reg := router.Builtin()
	infos := reg.Info()
	if len(infos) != len(reg.Names()) {
		t.Fatalf("Info() has %d entries, Names() %d", len(infos), len(reg.Names()))
	}
	for i, info := range infos {
		if info.Name != reg.Names()[i] || info.Source == "" || info.Rule == "" {
			t.Errorf("Info()[%d] = %+v: want name %q with a source and a rule", i, info, reg.Names()[i])
		}
		if line := info.String(); strings.Contains(line, "\n") || !strings.HasPrefix(line, info.Name+"\t") {
			t.Errorf("%s: String() = %q: want one line starting with the name", info.Name, line)
		}
	}
}

// Every variant a listing names builds; an unknown variant is refused.
func TestBuiltinVariantsBuild(t *testing.T) {
	reg := router.Builtin()
	for _, info := range reg.Info() {
		for _, v := range info.Variants {
			name, _, _ := strings.Cut(v, " ")
			if _, err := reg.New(info.Name, map[string]any{"variant": name}, 1); err != nil {
				t.Errorf("%s variant %q: %v", info.Name, name, err)
			}
		}
		if len(info.Variants) > 0 {
			if _, err := reg.New(info.Name, map[string]any{"variant": "no-such-variant"}, 1); err == nil {
				t.Errorf("%s: an unknown variant was accepted", info.Name)
			}
		}
	}
}

// TestBuiltinDefaults checks that every built-in policy exposes its configuration's
// defaults, and that they are what the registry builds with no parameters: a pointer-free
// struct the factory accepts back as parameters.
func TestBuiltinDefaults(t *testing.T) {
	reg := router.Builtin()
	for _, name := range reg.Names() {
		t.Run(name, func(t *testing.T) {
			d, err := reg.Defaults(name)
			if err != nil {
				t.Fatal(err)
			}
			if k := reflect.TypeOf(d).Kind(); k != reflect.Struct {
				t.Fatalf("Defaults(%s) is a %v, want a struct", name, k)
			}
			raw, err := json.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			var params map[string]any
			if err := json.Unmarshal(raw, &params); err != nil {
				t.Fatal(err)
			}
			if _, err := reg.New(name, params, 1); err != nil {
				t.Errorf("New(%s, its defaults as parameters): %v", name, err)
			}
		})
	}
	if _, err := reg.Defaults("no-such-policy"); !errors.Is(err, router.ErrUnknownPolicy) {
		t.Errorf("Defaults(no-such-policy): err = %v, want ErrUnknownPolicy", err)
	}
}
