package main

import (
	"io"
	"strings"
	"testing"
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
		})
	}
}
