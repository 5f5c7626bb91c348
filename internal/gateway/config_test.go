package gateway

import (
	"strings"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*Config)
		want   []string // substrings of the error; none means valid
	}{
		{"defaults with a backend", func(c *Config) {}, nil},
		{"no policy", func(c *Config) { c.Policy = "" }, []string{"policy: required"}},
		{"no backends", func(c *Config) { c.Backends = nil }, []string{"backends: at least one"}},
		{"bad scheme", func(c *Config) { c.Backends = []string{"ftp://x"} }, []string{"backends[0]"}},
		{"query", func(c *Config) { c.Backends = []string{"http://x?a=1"} }, []string{"backends[0]"}},
		{"duplicate", func(c *Config) { c.Backends = []string{"http://x:1/", "http://x:1"} }, []string{"backends[1]: url http://x:1 listed twice"}},
		{"named", func(c *Config) { c.Backends = []string{"gpu-a=http://x:1", "gpu.b_2=https://y/v"} }, nil},
		{"duplicate name", func(c *Config) { c.Backends = []string{"a=http://x:1", "a=http://x:2"} }, []string{"backends[1]: name a listed twice"}},
		{"bad name", func(c *Config) { c.Backends = []string{"a b=http://x:1"} }, []string{`backends[0]: name "a b"`}},
		{"bad key", func(c *Config) { c.APIKeys = []string{"a b"} }, []string{"api_keys[0]"}},
		{"zero interval", func(c *Config) { c.Health.MetricsInterval = 0 }, []string{"health.metrics_interval"}},
		{"backoff below interval", func(c *Config) { c.Health.MaxBackoff = time.Millisecond }, []string{"health.max_backoff"}},
		{"threshold", func(c *Config) { c.Health.FailureThreshold = 0 }, []string{"health.failure_threshold"}},
		{"timeouts", func(c *Config) { c.Timeouts = TimeoutsConfig{} }, []string{"timeouts.header", "timeouts.first_byte", "timeouts.idle", "timeouts.request"}},
		{"limits", func(c *Config) { c.Limits = LimitsConfig{MaxBodyBytes: -1, MaxRetries: 99} }, []string{"limits.max_body_bytes", "limits.max_retries"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			c.Backends = []string{"http://127.0.0.1:8000"}
			tc.mutate(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.HasPrefix(err.Error(), "gateway: config: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func TestNewRejectsUnknownPolicy(t *testing.T) {
	c := DefaultConfig()
	c.Backends = []string{"http://127.0.0.1:8000"}
	c.Policy = "no-such-policy"
	if _, err := New(c, Options{}); err == nil || !strings.Contains(err.Error(), "unknown policy") {
		t.Errorf("err = %v, want unknown policy", err)
	}
}

// TestBackendNames checks that a backend without a name gets one that does not reveal its
// URL and does not change when the list around it is edited.
func TestBackendNames(t *testing.T) {
	a, err := parseBackend("http://10.0.0.7:8000/")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(a.name, "backend-") || len(a.name) != len("backend-")+8 || strings.Contains(a.name, "10.0.0.7") {
		t.Errorf("default name %q: want backend- and 8 hex digits", a.name)
	}
	if b, _ := parseBackend("http://10.0.0.7:8000"); b != a {
		t.Errorf("the same URL got %+v and %+v", a, b)
	}
	if c, _ := parseBackend("http://10.0.0.8:8000"); c.name == a.name {
		t.Errorf("two URLs share the name %q", c.name)
	}
	if n, _ := parseBackend("gpu-a=http://10.0.0.7:8000"); n.name != "gpu-a" || n.url != a.url {
		t.Errorf("named: %+v", n)
	}
}
