package main

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"kvroute/internal/gateway"
)

// TestLoadPD checks the P/D keys and flags: the pd section, the policy spec's P/D form, and
// the errors of a P/D policy without a mode or a bad role.
func TestLoadPD(t *testing.T) {
	file := writeFile(t, "pd.yaml", `backends: [p0=http://p:1, d0=http://d:1]
pd: {mode: two-step, roles: {p0: prefill, d0: decode}}
policy: {name: llm-d-pd, decider: {name: prefix-based, non_cached_tokens: 16}, prefill: prefix-score, decode: {name: least-request}}
`)
	for _, tc := range []struct {
		name    string
		args    []string
		want    gateway.PDConfig
		policy  string
		wantErr string
	}{
		{name: "file", args: []string{"-config", file}, policy: "least-request", want: gateway.PDConfig{
			Mode: gateway.PDTwoStep, Roles: map[string]string{"p0": "prefill", "d0": "decode"}, Name: "llm-d-pd",
			Decider: gateway.PolicyRef{Name: "prefix-based", Params: map[string]any{"non_cached_tokens": 16}},
			Prefill: gateway.PolicyRef{Name: "prefix-score"}, Decode: gateway.PolicyRef{Name: "least-request"},
		}},
		{name: "flags", args: []string{"-backends", "p0=http://p:1,d0=http://d:1", "-pd-mode", "sidecar", "-pd-roles", "p0=prefill"},
			policy: "prefix-score", want: gateway.PDConfig{Mode: gateway.PDSidecar, Roles: map[string]string{"p0": "prefill"}}},
		{name: "P/D policy without a mode", args: []string{"-config", file, "-pd-mode", ""}, wantErr: "needs pd.mode"},
		{name: "bad role", args: []string{"-config", file, "-pd-roles", "p0=both"}, wantErr: `pd.roles[p0] "both"`},
		{name: "bad roles flag", args: []string{"-config", file, "-pd-roles", "p0"}, wantErr: "want NAME=prefill"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			c, err := o.load()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, c.Gateway.PD); d != "" {
				t.Errorf("pd (-want +got):\n%s", d)
			}
			if c.Gateway.Policy != tc.policy {
				t.Errorf("gateway policy %q, want %q", c.Gateway.Policy, tc.policy)
			}
		})
	}
}
