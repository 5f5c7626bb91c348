package emulate

import (
	"math"
	"strings"
	"testing"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want []string // substrings of the joined error; none means valid
	}{
		{"default", func(*Config) {}, nil},
		{"aliases", func(c *Config) { c.GPU, c.Model = "h100", "meta-llama/Llama-3.1-8B-Instruct" }, nil},
		{"unknown gpu and model", func(c *Config) { c.GPU, c.Model = "tpu", "gpt-4" }, []string{"unknown gpu", "unknown model"}},
		{"zero tp", func(c *Config) { c.TP = 0 }, []string{"tp must be at least 1"}},
		{"zero speed", func(c *Config) { c.Speed = 0 }, []string{"speed"}},
		{"NaN speed", func(c *Config) { c.Speed = math.NaN() }, []string{"speed"}},
		{"infinite speed", func(c *Config) { c.Speed = math.Inf(1) }, []string{"speed"}},
		{"negative blocks", func(c *Config) { c.NumBlocks = -1 }, []string{"num_blocks"}},
		{"batch limits", func(c *Config) { c.MaxNumBatchedTokens, c.MaxNumSeqs = 4096, 256 }, nil},
		{"negative batch limits", func(c *Config) { c.MaxNumSeqs = -1 }, []string{"max_num_seqs"}},
		{"unknown vllm release", func(c *Config) { c.VLLM = "v0.5" }, []string{"vllm", "unknown vLLM release"}},
		{"V0 not served", func(c *Config) { c.VLLM = "v0.6" }, []string{"vllm v0.6", "V1 releases only"}},
		{"cap below default", func(c *Config) { c.DefaultMaxTokens, c.MaxTokensCap = 32, 16 }, []string{"max_tokens_cap"}},
		{"no default tokens", func(c *Config) { c.DefaultMaxTokens = 0 }, []string{"default_max_tokens"}},
		{"no body", func(c *Config) { c.MaxBodyBytes = 0 }, []string{"max_body_bytes"}},
		{"spaced name", func(c *Config) { c.ServedModelName = " x" }, []string{"served_model_name"}},
		{"several", func(c *Config) { c.TP, c.Speed = -1, -1 }, []string{"tp", "speed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Validate() = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate() = nil, want errors about %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) || !strings.HasPrefix(err.Error(), "emulate: ") {
					t.Errorf("Validate() = %v, want it to mention %q", err, w)
				}
			}
		})
	}
}

func TestNewReplicaRejectsModelThatDoesNotFit(t *testing.T) {
	c := DefaultConfig()
	c.GPU, c.Model = "L4", "Llama-3.1-70B"
	if _, err := NewReplica(c); err == nil || !strings.HasPrefix(err.Error(), "emulate: ") {
		t.Errorf("NewReplica(70B on one L4) = %v, want an emulate error", err)
	}
}

// The batch limits reach the deployment the engine runs, with the activation reserve that
// vLLM's profiling run would take for them.
func TestConfigBatchLimits(t *testing.T) {
	c := DefaultConfig()
	c.MaxNumBatchedTokens, c.MaxNumSeqs = 2048, 64
	d, err := c.deployment()
	if err != nil {
		t.Fatal(err)
	}
	def, err := DefaultConfig().deployment()
	if err != nil {
		t.Fatal(err)
	}
	if d.MaxNumBatchedTokens != 2048 || d.MaxNumSeqs != 64 || d.ActivationReserveBytes >= def.ActivationReserveBytes {
		t.Errorf("deployment %d tokens, %d seqs, reserve %d (default %d): want 2048, 64 and a smaller reserve",
			d.MaxNumBatchedTokens, d.MaxNumSeqs, d.ActivationReserveBytes, def.ActivationReserveBytes)
	}
}
