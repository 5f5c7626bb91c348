package sweep

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

func TestParsePolicySpec(t *testing.T) {
	tests := []struct {
		name, in string
		want     PolicySpec
		wantErr  string
	}{
		{"bare name", "kv-router", PolicySpec{Name: "kv-router"}, ""},
		{"flow mapping", "{name: kv-router, overlap_score_credit: 1}",
			PolicySpec{Name: "kv-router", Params: map[string]any{"overlap_score_credit": 1}}, ""},
		{"json", `{"name":"prefix-cache","block_size":64,"x":0.5}`,
			PolicySpec{Name: "prefix-cache", Params: map[string]any{"block_size": 64, "x": 0.5}}, ""},
		{"mapping without params", "{name: least-request}", PolicySpec{Name: "least-request"}, ""},
		{"no name", "{block_size: 64}", PolicySpec{}, "needs a name"},
		{"name not a string", "{name: [a]}", PolicySpec{}, "needs a name"},
		{"a number", "5", PolicySpec{}, "want a name or a mapping"},
		{"a list", "[a, b]", PolicySpec{}, "want a name or a mapping"},
		{"empty", "", PolicySpec{}, "empty"},
		{"bad yaml", "{name: a", PolicySpec{}, "sweep:"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePolicySpec([]byte(tc.in))
			checkParsed(t, got, err, tc.want, tc.wantErr)
		})
	}
}

func TestParsePolicyParams(t *testing.T) {
	tests := []struct {
		name, in string
		want     map[string]any
		wantErr  string
	}{
		{"json object", `{"prefix_weight":3}`, map[string]any{"prefix_weight": 3}, ""},
		{"empty object", `{}`, nil, ""},
		{"a list", `[1]`, nil, "want a mapping"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePolicyParams([]byte(tc.in))
			checkParsed(t, got, err, tc.want, tc.wantErr)
		})
	}
}

// checkParsed fails t unless err mentions wantErr, or, when wantErr is empty, got is want.
func checkParsed[T any](t *testing.T, got T, err error, want T, wantErr string) {
	t.Helper()
	if wantErr != "" {
		if err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Fatalf("err = %v, want one mentioning %q", err, wantErr)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestRouterSeedIsThePointsRouterSeed holds cmd/route's derivation to the simulator's.
func TestRouterSeedIsThePointsRouterSeed(t *testing.T) {
	for _, seed := range []uint64{0, 1, 7, 1 << 63} {
		p := Point{File: File{Seed: seed}}
		if got, want := RouterSeed(seed), p.RouterSeedOf(0); got != want || got == seed {
			t.Errorf("seed %d: RouterSeed %d, point's router seed %d", seed, got, want)
		}
	}
}

// FuzzParsePolicySpec checks that any input is read or refused without a panic, and that a
// spec read back from its own YAML has the same name and label.
func FuzzParsePolicySpec(f *testing.F) {
	for _, s := range []string{"kv-router", "{name: kv-router, overlap_score_credit: 1}", `{"name":"x","a":[1,2],"b":{"c":.5}}`, "{name: ''}", "~"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePolicySpec(data)
		if err != nil {
			return
		}
		out, err := yaml.Marshal(p)
		if err != nil {
			t.Fatalf("marshal %+v: %v", p, err)
		}
		q, err := ParsePolicySpec(out)
		if err != nil {
			t.Fatalf("%q read, its YAML %q not: %v", data, out, err)
		}
		if p.Name != q.Name || p.Label() != q.Label() {
			t.Fatalf("round trip of %q: %q then %q", data, p.Label(), q.Label())
		}
	})
}
