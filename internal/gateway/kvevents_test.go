package gateway

import (
	"strings"
	"testing"
)

func TestKVEventsAndTokenizeConfig(t *testing.T) {
	base := func() Config {
		c := DefaultConfig()
		c.Backends = []string{"a=http://10.0.0.1:8000", "http://10.0.0.2:8000"}
		return c
	}
	cases := []struct {
		name string
		edit func(*Config)
		want string // "" for valid
	}{
		{"by name and by URL", func(c *Config) {
			c.KVEvents.Connect = []string{"a=tcp://10.0.0.1:5557", "http://10.0.0.2:8000=tcp://10.0.0.2:5557", "tcp://10.0.0.3:5557"}
			c.KVEvents.Replay = []string{"a=tcp://10.0.0.1:5558"}
		}, ""},
		{"bind", func(c *Config) { c.KVEvents.Bind = "tcp://127.0.0.1:5557" }, ""},
		{"unknown backend", func(c *Config) { c.KVEvents.Connect = []string{"b=tcp://x:1"} }, `kv_events.connect[0]: "b" is not a backend's name or URL`},
		{"not zmq", func(c *Config) { c.KVEvents.Connect = []string{"a=http://x:1"} }, `kv_events.connect[0]: endpoint "a=http://x:1": want tcp://host:port`},
		{"replay without a name", func(c *Config) { c.KVEvents.Replay = []string{"tcp://x:1"} }, `kv_events.replay[0]: "tcp://x:1": want NAME=tcp://host:port`},
		{"bad bind", func(c *Config) { c.KVEvents.Bind = ":5557" }, `kv_events.bind ":5557": want tcp://host:port`},
		{"block size", func(c *Config) { c.KVEvents.Bind, c.KVEvents.BlockSize = "tcp://127.0.0.1:1", 0 }, "kv_events.block_size 0: want > 0"},
		{"replay with bind", func(c *Config) {
			c.KVEvents.Bind, c.KVEvents.Replay = "tcp://127.0.0.1:5557", []string{"a=tcp://10.0.0.1:5558"}
		}, `kv_events.replay[0]: "a" has no kv_events.connect entry a=tcp://...`},
		{"replay of a bare stream", func(c *Config) {
			c.KVEvents.Connect, c.KVEvents.Replay = []string{"tcp://10.0.0.1:5557"}, []string{"a=tcp://10.0.0.1:5558"}
		}, `kv_events.replay[0]: "a" has no kv_events.connect entry`},
		{"bind and forward", func(c *Config) { c.KVEvents.Bind, c.KVEvents.Forward = "tcp://*:5557", "tcp://*:5600" }, ""},
		{"forward without bind", func(c *Config) { c.KVEvents.Forward = "tcp://*:5600" }, "kv_events.forward \"tcp://*:5600\": re-publishes what kv_events.bind receives"},
		{"forward on bind", func(c *Config) { c.KVEvents.Bind, c.KVEvents.Forward = "tcp://*:5557", "tcp://*:5557" }, "want an endpoint other than bind"},
		{"bootstrap", func(c *Config) {
			c.KVEvents.Bind, c.KVEvents.BootstrapFrom = "tcp://*:5557", []string{"http://router-0:9090"}
		}, ""},
		{"bootstrap not a URL", func(c *Config) { c.KVEvents.BootstrapFrom = []string{"router-0:9090"} }, `kv_events.bootstrap_from[0] "router-0:9090": want`},
		{"bootstrap timeout", func(c *Config) {
			c.KVEvents.BootstrapFrom, c.KVEvents.BootstrapTimeout = []string{"http://r:1"}, 0
		}, "kv_events.bootstrap_timeout 0s: want > 0"},
		{"tokenize", func(c *Config) { c.Tokenize = TokenizeConfig{Remote: true, CacheEntries: -1} }, "tokenize.cache_entries -1: want >= 0\ntokenize.timeout 0s: want > 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestResolvePod(t *testing.T) {
	c := DefaultConfig()
	c.Backends = []string{"vllm-0=http://10.0.0.1:8000", "http://10.0.0.2:8000"}
	g, err := New(c, Options{})
	if err != nil {
		t.Fatal(err)
	}
	unnamed := g.Backends()[1].Name // the name the gateway gave it: its endpoint ID
	for pod, want := range map[string]string{
		"vllm-0":               "vllm-0", // the backend's name (llm-d's kv@${POD_NAME}@...)
		"http://10.0.0.1:8000": "vllm-0", // its URL
		"10.0.0.2:8000":        unnamed,  // its URL's host:port (llm-d-inference-sim's POD_IP:port)
		"10.0.0.9:8000":        "",
	} {
		got, ok := g.resolve(pod)
		if got != want || ok != (want != "") {
			t.Errorf("resolve(%q) = %q, %v; want %q", pod, got, ok, want)
		}
	}
}
