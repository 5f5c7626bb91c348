package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzDecodeConfig checks that any bytes are decoded or refused without a panic, and that a
// config in the deprecated spelling decodes as its rewrite in the current one.
func FuzzDecodeConfig(f *testing.F) {
	f.Add([]byte(fullConfig))
	f.Add([]byte("policy: prefix-cache\npolicy_params: {imbalance_abs: 8}\nhealth: {scrape_interval: 1s}\n"))
	f.Add([]byte("policy_params: ~\n"))
	f.Add([]byte("policy: [a]\npolicy_params: {x: 1}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c := defaultFileConfig()
		if err := decodeYAML(data, &c); err != nil || len(c.deprecated) == 0 {
			return
		}
		// Rewritten by hand: only the interval's key, whose rename is textual.
		if !strings.Contains(string(data), "policy_params") {
			d := defaultFileConfig()
			if err := decodeYAML([]byte(strings.ReplaceAll(string(data), "scrape_interval", "metrics_interval")), &d); err != nil {
				return // the text also held scrape_interval outside health
			}
			if diff := cmp.Diff(c, d, cmp.AllowUnexported(fileConfig{}), cmpopts.IgnoreFields(fileConfig{}, "deprecated")); diff != "" {
				t.Fatalf("%q: deprecated and current spellings differ (-old +new):\n%s", data, diff)
			}
		}
	})
}
