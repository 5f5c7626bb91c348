package main

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestPDFlags(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		roles   string
		wantErr string
	}{
		{"aggregated", []string{"-replicas", "2"}, "", ""},
		{"split", []string{"-replicas", "4", "-prefill-replicas", "2"}, "replica-0=prefill,replica-1=prefill,replica-2=decode,replica-3=decode", ""},
		{"one role", []string{"-replicas", "2", "-role", "decode"}, "replica-0=decode,replica-1=decode", ""},
		{"no decoder left", []string{"-replicas", "2", "-prefill-replicas", "2"}, "", "leaving a decode replica"},
		{"both", []string{"-replicas", "3", "-prefill-replicas", "1", "-role", "decode"}, "", "exclusive"},
		{"bad role", []string{"-role", "both"}, "", `pd.role "both"`},
		{"bad policy", []string{"-role", "decode", "-kv-transfer-failure-policy", "retry"}, "", "failure_policy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, err := parseFlags(tc.args, io.Discard)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := o.pdRoles(); got != tc.roles {
				t.Errorf("roles %q, want %q", got, tc.roles)
			}
			if ec := o.poolEngine(0); ec != nil {
				t.Errorf("replica 0 has a pool engine %+v without a fleet file", ec)
			}
		})
	}
}

func TestPDFleetFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "pd.yaml")
	if err := os.WriteFile(file, []byte(`fleet:
  gpu: H100-SXM-80GB
  model: llama-3.1-8b
  pools:
    - {role: prefill, replicas: 1, tp: 1}
    - {role: decode, replicas: 2, tp: 2}
  kv_transfer: {bandwidth_gbps: 200, base_latency: 5ms}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	o, err := parseFlags([]string{"-fleet", file, "-kv-transfer-base-latency", "7ms"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := o.pdRoles(), "replica-0=prefill,replica-1=decode,replica-2=decode"; o.replicas != 3 || got != want {
		t.Errorf("%d replicas, roles %q: want 3, %q", o.replicas, got, want)
	}
	for i, want := range []int{1, 2, 2} {
		if tp := o.poolEngine(i).Deployment.TP; tp != want {
			t.Errorf("replica %d tp %d, want its pool's %d", i, tp, want)
		}
	}
	if o.cfg.PD.BandwidthGbps != 200 || o.cfg.PD.BaseLatency != 7*time.Millisecond {
		t.Errorf("link %+v: want the file's 200 Gbit/s and the flag's 7ms", o.cfg.PD)
	}
	if _, err := parseFlags([]string{"-fleet", file, "-role", "decode"}, io.Discard); err == nil || !strings.Contains(err.Error(), "do not apply") {
		t.Errorf("-role with pools: err %v", err)
	}
}
