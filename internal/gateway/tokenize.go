package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cespare/xxhash/v2"
	lru "github.com/hashicorp/golang-lru/v2"

	"kvroute/router"
)

// TokenizeConfig is how the gateway fills each request's token ids (router.Request.Tokens)
// from a backend's POST /tokenize, as the engine forms them (chat template included), as
// llm-d's token-producer does. It does so whenever the policy reads token ids
// (router.ReadsTokens: kv-router, predicted-ttft, precise-prefix, token-load, vtc-basic,
// prefix-score's llm-d variant), and for any policy with Remote.
type TokenizeConfig struct {
	// Remote asks a ready backend's /tokenize for every request without token ids, whatever
	// the policy.
	Remote bool `yaml:"remote" json:"remote"`
	// CacheEntries bounds the cache of prompts already tokenized (4,096; 0 disables it).
	CacheEntries int `yaml:"cache_entries" json:"cache_entries"`
	// Timeout bounds one /tokenize call (2s); a request whose call fails, or that no backend
	// could tokenize (one without /tokenize), is routed without token ids (its prefix score
	// is 0), and kvroute_gateway_tokenize_seconds{result="error"} counts it.
	Timeout time.Duration `yaml:"timeout" json:"timeout"`
}

func (c TokenizeConfig) validate() error {
	var errs []error
	if c.CacheEntries < 0 {
		errs = append(errs, fmt.Errorf("tokenize.cache_entries %d: want >= 0", c.CacheEntries))
	}
	if c.Remote && c.Timeout <= 0 {
		errs = append(errs, fmt.Errorf("tokenize.timeout %v: want > 0", c.Timeout))
	}
	return errors.Join(errs...)
}

// tokenizer asks backends' /tokenize, with a bounded LRU cache keyed by a hash of the body.
type tokenizer struct {
	client *http.Client
	cache  *lru.Cache[uint64, []int32] // nil: no cache
	next   atomic.Uint64               // rotates over ready backends
}

func newTokenizer(c TokenizeConfig, rt http.RoundTripper) (*tokenizer, error) {
	t := &tokenizer{client: &http.Client{Transport: rt}}
	if c.CacheEntries > 0 {
		var err error
		if t.cache, err = lru.New[uint64, []int32](c.CacheEntries); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// tokenizeBody is vLLM's TokenizeCompletionRequest or TokenizeChatRequest
// (vllm/entrypoints/openai/protocol.py): model plus prompt, or model plus messages with
// add_generation_prompt, which the chat completion itself applies.
type tokenizeBody struct {
	Model               string        `json:"model,omitempty"`
	Prompt              *string       `json:"prompt,omitempty"`
	Messages            []wireMessage `json:"messages,omitempty"`
	AddGenerationPrompt *bool         `json:"add_generation_prompt,omitempty"`
}

type wireMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// fillTokens sets req.Tokens from the cache or a ready backend. It reports the outcome for the
// metrics: "hit", "miss" (asked a backend) or "error".
func (g *Gateway) fillTokens(ctx context.Context, st *state, req *router.Request) string {
	body := tokenizeBody{Model: req.Model}
	if len(req.Messages) > 0 {
		yes := true
		body.Messages, body.AddGenerationPrompt = make([]wireMessage, len(req.Messages)), &yes
		for i, m := range req.Messages {
			body.Messages[i] = wireMessage{Role: m.Role, Content: m.Content}
		}
	} else {
		body.Prompt = &req.Prompt
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return "error"
	}
	t := g.tok
	key := xxhash.Sum64(raw)
	if t.cache != nil {
		if ids, ok := t.cache.Get(key); ok {
			req.Tokens, req.InputTokens = ids, len(ids)
			return "hit"
		}
	}
	ids, err := t.ask(ctx, g.readyURL(st), raw, st.cfg.Tokenize.Timeout)
	if err != nil {
		return "error"
	}
	if t.cache != nil {
		t.cache.Add(key, ids)
	}
	req.Tokens, req.InputTokens = ids, len(ids)
	return "miss"
}

// readyURL picks the next ready backend's URL in rotation ("" when none is ready).
func (g *Gateway) readyURL(st *state) string {
	n := uint64(len(st.backends))
	start := g.tok.next.Add(1)
	g.mu.Lock()
	defer g.mu.Unlock()
	for i := range n {
		if b := st.backends[(start+i)%n]; b.ready {
			return b.url
		}
	}
	return ""
}

// ask posts body to base's /tokenize and decodes vLLM's TokenizeResponse.
func (t *tokenizer) ask(ctx context.Context, base string, body []byte, timeout time.Duration) ([]int32, error) {
	if base == "" {
		return nil, errors.New("gateway: tokenize: no ready backend")
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/tokenize", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	resp, err := t.client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16))
		return nil, fmt.Errorf("gateway: tokenize: status %d", resp.StatusCode)
	}
	var out struct {
		Count  int      `json:"count"`
		Tokens []uint32 `json:"tokens"` // vLLM's ids fit int32; llm-d-inference-sim's use all 32 bits
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&out); err != nil {
		return nil, fmt.Errorf("gateway: tokenize: %w", err)
	}
	if out.Count != len(out.Tokens) {
		return nil, fmt.Errorf("gateway: tokenize: count %d for %d tokens", out.Count, len(out.Tokens))
	}
	ids := make([]int32, len(out.Tokens))
	for i, t := range out.Tokens {
		ids[i] = int32(t) // bit for bit, as KV events' ids are kept (internal/kvevents)
	}
	return ids, nil
}
