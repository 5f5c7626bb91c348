package router

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
	"unicode/utf8"
	"unsafe"

	"kvroute/router/prefix"
)

// Variants of prefix-score.
const (
	// PrefixScoreGIE is the Gateway API Inference Extension EPP's last release, v1.5.0
	// (kubernetes-sigs/gateway-api-inference-extension, tag v1.5.0): text chunks of
	// block size × 4 characters; chat requests hash json.Marshal(messages).
	PrefixScoreGIE = "gie-v1.5.0"
	// PrefixScoreLLMD is its successor, llm-d-router v0.10.0 (llm-d/llm-d-router, tag v0.10.0):
	// token blocks of at least 64 tokens, the trailing partial block included.
	PrefixScoreLLMD = "llm-d-router-v0.10.0"
)

// PrefixScoreConfig configures prefix-score, the endpoint picker's default scheduling profile:
// the queue scorer (weight 2), the KV-cache-utilization scorer (2) and the approximate prefix
// scorer (3), summed in that order (GIE v1.5.0 pkg/epp/config/loader/defaults.go 46–90;
// scheduling/scheduler_profile.go 155–173 adds weight × score per scorer in profile order, so
// the floating-point rounding of that order decides exact ties), then the max-score picker.
// Defaults are GIE v1.5.0's
// (pkg/epp/framework/plugins/requestcontrol/dataproducer/approximateprefix/types.go 90–136).
type PrefixScoreConfig struct {
	// Variant picks the upstream release: "gie-v1.5.0" (default) or "llm-d-router-v0.10.0".
	Variant string `json:"variant"`
	// BlockSizeTokens is the block size in tokens when auto-tuning does not give the engine's
	// (16). The llm-d-router variant floors it at 64 (plugin.go minBlockSizeTokens).
	BlockSizeTokens int `json:"block_size_tokens"`
	// CharsPerToken converts tokens to characters for the text chunks of the GIE variant (4).
	CharsPerToken int `json:"average_chars_per_token"`
	// MaxPrefixBlocks caps the blocks hashed per request (256).
	MaxPrefixBlocks int `json:"max_prefix_blocks_to_match"`
	// MaxPrefixTokens, when > 0, caps them at MaxPrefixTokens / block size instead; 0 means
	// the variant's default (none for GIE v1.5.0, 131,072 for llm-d-router v0.10.0).
	MaxPrefixTokens int `json:"max_prefix_tokens_to_match"`
	// LRUCapacityPerServer is an endpoint's index capacity in blocks when auto-tuning has no
	// num_gpu_blocks (31,250). GIE v1.5.0 ignores it and always uses 31,250 (plugin.go 208);
	// llm-d-router v0.10.0 honours it.
	LRUCapacityPerServer int `json:"lru_capacity_per_server"`
	// AutoTune takes the block size from the first candidate's vllm:cache_config_info
	// block_size and each endpoint's index capacity from its num_gpu_blocks (true).
	AutoTune bool `json:"auto_tune"`
	// PrefixWeight, QueueWeight and KVCacheWeight weigh the three scorers (3, 2, 2).
	PrefixWeight  float64 `json:"prefix_weight"`
	QueueWeight   float64 `json:"queue_weight"`
	KVCacheWeight float64 `json:"kv_cache_weight"`
}

// DefaultPrefixScoreConfig returns GIE v1.5.0's defaults.
func DefaultPrefixScoreConfig() PrefixScoreConfig {
	return PrefixScoreConfig{
		Variant: PrefixScoreGIE, BlockSizeTokens: 16, CharsPerToken: 4, MaxPrefixBlocks: 256,
		LRUCapacityPerServer: prefix.DefaultIndexCapacity, AutoTune: true,
		PrefixWeight: 3, QueueWeight: 2, KVCacheWeight: 2,
	}
}

// Validate checks ranges.
func (c PrefixScoreConfig) Validate() error {
	var errs []error
	if c.Variant != PrefixScoreGIE && c.Variant != PrefixScoreLLMD {
		errs = append(errs, fmt.Errorf("variant %q: want %q or %q", c.Variant, PrefixScoreGIE, PrefixScoreLLMD))
	}
	for _, f := range []struct {
		name string
		v    int
	}{
		{"block_size_tokens", c.BlockSizeTokens}, {"average_chars_per_token", c.CharsPerToken},
		{"max_prefix_blocks_to_match", c.MaxPrefixBlocks}, {"lru_capacity_per_server", c.LRUCapacityPerServer},
		{"max_prefix_tokens_to_match", c.MaxPrefixTokens + 1},
	} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("%s %d: want > 0", f.name, f.v))
		}
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"prefix_weight", c.PrefixWeight}, {"queue_weight", c.QueueWeight}, {"kv_cache_weight", c.KVCacheWeight}} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			errs = append(errs, fmt.Errorf("%s %v: want a finite value >= 0", f.name, f.v))
		}
	}
	return errors.Join(errs...)
}

// NewPrefixScore returns the endpoint picker's default scheduling profile as a Pipeline named
// "prefix-score".
func NewPrefixScore(cfg PrefixScoreConfig, rng *rand.Rand) (*Pipeline, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("router: prefix-score: %w", err)
	}
	ps, err := NewPrefixScorer(cfg)
	if err != nil {
		return nil, fmt.Errorf("router: prefix-score: %w", err)
	}
	return NewPipeline("prefix-score", ReasonMaxScore, nil, []Weighted{
		{Scorer: QueueScorer{}, Weight: cfg.QueueWeight},
		{Scorer: KVCacheScorer{}, Weight: cfg.KVCacheWeight},
		{Scorer: ps, Weight: cfg.PrefixWeight},
	}, MaxScorePicker{}, rng)
}

// llmdMinBlockTokens and llmdMaxPrefixTokens are llm-d-router v0.10.0's floor on the block
// size (approximateprefix/plugin.go 44–52) and its default maxPrefixTokensToMatch (types.go 115).
const (
	llmdMinBlockTokens  = 64
	llmdMaxPrefixTokens = 131072
)

// PrefixScorer is the approximate prefix-cache scorer. Per request it hashes a chain of blocks
// (see hashText and hashTokens); an endpoint scores the blocks the shared index says it holds
// along the walk from the first block to the first block nobody holds, over the request's
// blocks (scorer/prefix/plugin.go 95–115). Routed adds every block for the chosen endpoint,
// whose LRU is sized when it is first added to (indexer.go Add). It is not safe for concurrent
// use on its own: a Pipeline serializes it.
type PrefixScorer struct {
	cfg       PrefixScoreConfig
	ids       interner
	index     *prefix.Index
	count     []int
	counted   uint64  // the decision (Snapshot.Seq) count was matched for; 0: none
	cids      []int32 // the candidates' ids, in candidate order
	gpuBlocks []int   // num_gpu_blocks last seen per endpoint id
	sized     []bool  // the endpoint's LRU exists (it was added to since it joined)
	blockSize int     // block size in tokens of the current decision
	memo      hashMemo
	stale     staleBlocks
}

var (
	_ Observer      = (*PrefixScorer)(nil)
	_ PrefixMatcher = (*PrefixScorer)(nil)
)

// NewPrefixScorer returns an empty prefix scorer.
func NewPrefixScorer(cfg PrefixScoreConfig) (*PrefixScorer, error) {
	index, err := prefix.NewIndex(cfg.LRUCapacityPerServer)
	if err != nil {
		return nil, err
	}
	p := &PrefixScorer{cfg: cfg, ids: newInterner(), index: index}
	p.blockSize = p.floor(cfg.BlockSizeTokens)
	return p, nil
}

func (p *PrefixScorer) floor(bs int) int {
	if p.cfg.Variant == PrefixScoreLLMD {
		return max(bs, llmdMinBlockTokens)
	}
	return bs
}

// setBlockSize takes the first candidate's engine block size when auto-tuning (GetBlockSize:
// GIE v1.5.0 plugin.go 237–250, llm-d-router v0.10.0 plugin.go 344–357).
func (p *PrefixScorer) setBlockSize(s *Snapshot, cand []int) {
	bs := p.cfg.BlockSizeTokens
	if p.cfg.AutoTune && len(cand) > 0 && s.Endpoints[cand[0]].BlockSize > 0 {
		bs = s.Endpoints[cand[0]].BlockSize
	}
	if bs = p.floor(bs); bs != p.blockSize {
		p.blockSize, p.memo.seq = bs, 0
	}
}

// maxBlocks is resolveMaxBlocks: a token cap, when set, divided by the block size; a cap
// below one block gives 0 blocks, and nothing is hashed (GIE v1.5.0 plugin.go 142–146;
// llm-d-router v0.10.0 plugin.go 359–370).
func (p *PrefixScorer) maxBlocks() int {
	tokens := p.cfg.MaxPrefixTokens
	if tokens == 0 && p.cfg.Variant == PrefixScoreLLMD {
		tokens = llmdMaxPrefixTokens
	}
	if tokens > 0 {
		return tokens / p.blockSize
	}
	return p.cfg.MaxPrefixBlocks
}

func (p *PrefixScorer) hashes(req *Request, seq uint64) []uint64 {
	h, _ := p.memo.get(seq, func(dst []uint64, buf []byte) ([]uint64, []byte, error) {
		seed := prefix.Seed(req.Model, req.Adapter)
		if salt := cacheSalt(req.Body); salt != "" {
			seed = prefix.Seed(req.Model, req.Adapter, salt)
		}
		if p.cfg.Variant == PrefixScoreLLMD {
			return hashTokens(dst[:0], seed, req.Tokens, p.blockSize, p.maxBlocks()), buf, nil
		}
		chunk := p.blockSize * p.cfg.CharsPerToken
		input, buf := gieInput(req, buf[:0], chunk*p.maxBlocks())
		return hashText(dst[:0], seed, input, chunk, p.maxBlocks()), buf, nil
	})
	return h
}

// cacheSalt is the body's cache_salt, vLLM's per-request prefix-cache isolation, which GIE
// v1.5.0 (hashing.go 70–77) and llm-d-router v0.10.0 (prefixhash/hashing.go 92–98) write into
// the first block's hash after the model; "" without a body or salt. Only a body that
// mentions the key is decoded.
func cacheSalt(body []byte) string {
	if len(body) == 0 || !bytes.Contains(body, []byte(`"cache_salt"`)) {
		return ""
	}
	var v struct {
		CacheSalt string `json:"cache_salt"`
	}
	if json.Unmarshal(body, &v) != nil {
		return ""
	}
	return v.CacheSalt
}

// gieMessage is a chat message as GIE v1.5.0 marshals it (scheduling/types.go 350–355, 402–410).
type gieMessage struct {
	Role    string `json:"role,omitempty"`
	Content string `json:"content"`
}

// gieInput is what GIE v1.5.0 hashes (approximateprefix/hashing.go getUserInputBytes 96–125):
// json.Marshal of the messages for a chat request (roles, quoting and Go's HTML escaping
// included), the prompt text otherwise. hashText reads at most limit bytes of it, so only
// those are produced: the messages are marshalled one at a time, a content cut a few bytes
// past what can still be read (escaping only lengthens a string, and a rune cut at the end
// changes nothing before it), and the result cut at limit. On a 220 KB chat that is the
// difference between a few and a few hundred microseconds per decision.
func gieInput(req *Request, buf []byte, limit int) (string, []byte) {
	if req.Messages == nil {
		return req.Prompt, buf
	}
	b := append(buf[:0], '[')
	for i, m := range req.Messages {
		if i > 0 {
			b = append(b, ',')
		}
		content := m.Content
		if excess := len(content) - (limit - len(b)); excess > utf8.UTFMax {
			content = content[:len(content)-excess+utf8.UTFMax]
		}
		mb, err := json.Marshal(gieMessage{Role: m.Role, Content: content})
		if err != nil { // strings always marshal
			return req.Prompt, buf
		}
		if b = append(b, mb...); len(b) >= limit {
			b = b[:limit]
			return unsafe.String(unsafe.SliceData(b), len(b)), b
		}
	}
	b = append(b, ']')
	return unsafe.String(unsafe.SliceData(b), len(b)), b
}

// hashText is GIE v1.5.0's hashPrompt (hashing.go 34–88): nothing when the input is shorter
// than one chunk or a cap of no block; at most maxBlocks chunks; full chunks only.
func hashText(dst []uint64, seed uint64, input string, chunk, maxBlocks int) []uint64 {
	if chunk < 1 || len(input) < chunk || maxBlocks < 1 {
		return dst
	}
	return prefix.ChainHashString(dst, seed, input, chunk, maxBlocks, false)
}

// hashTokens is llm-d-router v0.10.0's GetBlockHashes (dataproducer/prefixhash/hashing.go):
// blocks of blockSize token ids, the trailing partial block included, at most maxBlocks, chained
// from a seed of the model (and salt). Nothing without token ids. The chain uses the project's
// token-block hash (prefix.TokenBlockHash); llm-d's xxhash differs in value, not in which
// blocks match.
func hashTokens(dst []uint64, seed uint64, tokens []int32, blockSize, maxBlocks int) []uint64 {
	parent := seed
	for i := 0; i < len(tokens) && len(dst) < maxBlocks; i += blockSize {
		parent = prefix.TokenBlockHash(parent, tokens[i:min(i+blockSize, len(tokens))])
		dst = append(dst, parent)
	}
	return dst
}

// Score writes matched blocks / total blocks per candidate.
func (p *PrefixScorer) Score(req *Request, s *Snapshot, cand []int, out []float64) {
	p.setBlockSize(s, cand)
	hashes := p.hashes(req, s.Seq)
	clear(out)
	p.cids = p.cids[:0]
	for _, i := range cand {
		id := p.ids.id(s.Endpoints[i].ID)
		p.gpuBlocks = grow(p.gpuBlocks, int(id)+1)
		p.gpuBlocks[id] = s.Endpoints[i].NumGPUBlocks
		p.cids = append(p.cids, id)
	}
	if len(hashes) == 0 {
		return
	}
	p.count = resize(p.count, p.ids.size())
	p.match(hashes, p.count)
	p.counted = s.Seq
	for k, id := range p.cids {
		out[k] = float64(p.count[id]) / float64(len(hashes))
	}
}

// MatchedTokens is the match llm-d's prefix-based P/D decider reads from the approximate
// producer: the endpoint's matched blocks, unweighted, times the block size in tokens
// (llm-d/llm-d-router v0.10.0 approximateprefix/plugin.go:241-244 puts matchLen blocks and
// the block size on each endpoint; prefix_based_pd_decider.go:150 multiplies them). A
// trailing partial block of the llm-d variant counts whole, as there. It reads the index as
// the Pick that chose i left it, before Routed adds the request.
func (p *PrefixScorer) MatchedTokens(req *Request, s *Snapshot, i int) int {
	hashes := p.hashes(req, s.Seq)
	id, ok := p.ids.lookup(s.Endpoints[i].ID)
	if len(hashes) == 0 || !ok {
		return 0
	}
	if s.Seq == 0 || p.counted != s.Seq || int(id) >= len(p.count) {
		p.count = resize(p.count, p.ids.size())
		p.match(hashes, p.count)
		p.counted = s.Seq
	}
	return p.count[id] * p.blockSize
}

// grow extends b with zero values to length n.
func grow[T any](b []T, n int) []T {
	for len(b) < n {
		var zero T
		b = append(b, zero)
	}
	return b
}

// Routed adds the request's blocks to the chosen endpoint's index, creating its LRU with the
// endpoint's num_gpu_blocks (auto-tune) or the default capacity first (makeserver: GIE v1.5.0
// plugin.go 207–217 always falls back to 31,250; llm-d-router v0.10.0 to lruCapacityPerServer).
func (p *PrefixScorer) Routed(req *Request, d Decision, endpoint string, _ time.Time) {
	hashes := p.hashes(req, d.Seq)
	if len(hashes) == 0 {
		return
	}
	id := p.ids.id(endpoint)
	p.sized = grow(p.sized, int(id)+1)
	p.gpuBlocks = grow(p.gpuBlocks, int(id)+1)
	if !p.sized[id] {
		capacity := prefix.DefaultIndexCapacity
		if p.cfg.Variant == PrefixScoreLLMD {
			capacity = p.cfg.LRUCapacityPerServer
		}
		if p.cfg.AutoTune && p.gpuBlocks[id] > 0 {
			capacity = p.gpuBlocks[id]
		}
		_ = p.index.SetCapacity(id, capacity) // capacity > 0
		p.sized[id] = true
	}
	p.index.Add(hashes, id)
	p.stale.added(p.index, hashes, id)
}

// Finished does nothing: the index forgets through its LRU.
func (*PrefixScorer) Finished(*Request, string, Usage, time.Time) {}

// Removed drops the endpoint's index; its LRU is created afresh when it is next added to.
func (p *PrefixScorer) Removed(endpoint string) {
	if id, ok := p.ids.lookup(endpoint); ok {
		p.index.RemoveEndpoint(id) // its stale blocks stay: RemovePod empties the LRU only
		if int(id) < len(p.sized) {
			p.sized[id] = false
		}
	}
}
