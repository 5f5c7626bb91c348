package router

import (
	"bytes"
	"encoding/binary"
	"encoding/json"

	"kvroute/router/prefix"
)

// approxPrefix is token-load's approximate prefix producer, llm-d-router v0.10.0's
// approx-prefix-cache-producer (pkg/epp/framework/plugins/requestcontrol/dataproducer/
// approximateprefix): per request, chained hashes of blocks of token ids (the trailing
// partial block included, at most maxTokens / block size blocks: prefixhash/hashing.go
// 60–117, plugin.go 367–375); per endpoint, an LRU of the blocks routed there, created
// with the endpoint's num_gpu_blocks when auto-tuning (plugin.go 302–313, indexer.go
// 55–86). The block size is the first candidate's engine block size when auto-tuning, else
// the configured one, and never below 64 (GetBlockSize, plugin.go 344–357). Without token
// ids it hashes the estimate tokenizer's pseudo-tokens (see estimateTokens).
type approxPrefix struct {
	cfgBlock  int
	autoTune  bool
	maxTokens int
	capacity  int // LRU size without auto-tuning or num_gpu_blocks

	block     int  // block size of the current decision
	prepared  bool // prepare ran for the Pick in progress
	ids       interner
	index     *prefix.Index
	count     []int
	counted   uint64 // the decision (Snapshot.Seq) count and total were matched for; 0: none
	total     int    // the request's blocks at that match
	gpuBlocks []int  // num_gpu_blocks last seen per endpoint id
	sized     []bool // the endpoint's LRU exists
	memo      hashMemo
	toks      []int32
	raw       []byte
}

func newApproxPrefix(cfg TokenLoadConfig) (*approxPrefix, error) {
	index, err := prefix.NewIndex(cfg.LRUCapacityPerServer)
	if err != nil {
		return nil, err
	}
	a := &approxPrefix{cfgBlock: cfg.BlockSizeTokens, autoTune: cfg.AutoTune, maxTokens: cfg.MaxPrefixTokens,
		capacity: cfg.LRUCapacityPerServer, ids: newInterner(), index: index}
	a.block = max(cfg.BlockSizeTokens, llmdMinBlockTokens)
	return a, nil
}

// prepare sets the decision's block size from the candidates the producer sees (all of
// them, before any filter) and records each candidate's num_gpu_blocks.
func (a *approxPrefix) prepare(s *Snapshot, cand []int) {
	a.counted = 0
	bs := a.cfgBlock
	if a.autoTune && len(cand) > 0 && s.Endpoints[cand[0]].BlockSize > 0 {
		bs = s.Endpoints[cand[0]].BlockSize
	}
	if bs = max(bs, llmdMinBlockTokens); bs != a.block {
		a.block, a.memo.seq = bs, 0
	}
	for _, i := range cand {
		id := a.ids.id(s.Endpoints[i].ID)
		a.gpuBlocks = grow(a.gpuBlocks, int(id)+1)
		a.gpuBlocks[id] = s.Endpoints[i].NumGPUBlocks
	}
	a.prepared = true
}

// tokens returns the request's token ids, or the estimate tokenizer's pseudo-tokens.
func (a *approxPrefix) tokens(req *Request) []int32 {
	if len(req.Tokens) > 0 {
		return req.Tokens
	}
	a.toks, a.raw = estimateTokens(req, a.toks[:0], a.raw[:0])
	return a.toks
}

// hashes returns the request's block hashes under the current block size.
func (a *approxPrefix) hashes(req *Request, seq uint64) []uint64 {
	h, _ := a.memo.get(seq, func(dst []uint64, buf []byte) ([]uint64, []byte, error) {
		maxBlocks := int(^uint(0) >> 1)
		if a.maxTokens > 0 {
			maxBlocks = max(1, a.maxTokens/a.block)
		}
		return hashTokens(dst[:0], prefix.Seed(req.Model, req.Adapter), a.tokens(req), a.block, maxBlocks), buf, nil
	})
	return h
}

// match fills a.count with each endpoint's matched blocks and returns the request's blocks.
// Within one decision (seq not 0) the index does not change until Routed adds the request,
// so the affinity filter, the scorer, the P/D decider and Routed share one match.
func (a *approxPrefix) match(req *Request, seq uint64) int {
	if seq != 0 && seq == a.counted && len(a.count) == a.ids.size() {
		return a.total
	}
	hs := a.hashes(req, seq)
	a.count = resize(a.count, a.ids.size())
	a.counted, a.total = seq, len(hs)
	if len(hs) == 0 {
		clear(a.count)
		return 0
	}
	a.index.Match(hs, a.count)
	return len(hs)
}

// scores writes matched blocks / request blocks per candidate (the affinity filter's
// prefixCacheScore, prefixcacheaffinity/plugin.go 227–238).
func (a *approxPrefix) scores(req *Request, s *Snapshot, cand []int, out []float64) {
	clear(out)
	total := a.match(req, s.Seq)
	if total == 0 {
		return
	}
	for k, i := range cand {
		if id, ok := a.ids.lookup(s.Endpoints[i].ID); ok && int(id) < len(a.count) {
			out[k] = float64(a.count[id]) / float64(total)
		}
	}
}

// matched is the approximate producer's match on endpoint s.Endpoints[i] in tokens, matched
// blocks × block size (approximateprefix/plugin.go:241-244), as llm-d's prefix-based P/D
// decider reads it (prefix_based_pd_decider.go:150).
func (a *approxPrefix) matched(req *Request, s *Snapshot, i int) int {
	a.match(req, s.Seq)
	if id, ok := a.ids.lookup(s.Endpoints[i].ID); ok && int(id) < len(a.count) {
		return a.count[id] * a.block
	}
	return 0
}

// uncached is the prompt tokens endpoint would compute (inflightload/producer.go
// uncachedInputTokens, 610–639): the unmatched indexed blocks, each a whole block (the
// trailing partial one included), plus any tokens past the last indexed block. It reads
// a.count as match left it.
func (a *approxPrefix) uncached(input int64, total int, endpoint string) int64 {
	matched := 0
	if id, ok := a.ids.lookup(endpoint); ok && int(id) < len(a.count) {
		matched = a.count[id]
	}
	indexed := int64(total * a.block)
	return int64(total-matched)*int64(a.block) + max(0, input-indexed)
}

// inputTokens is the request's prompt length as the token producer counts it: its token
// ids, else its pseudo-tokens, else its declared length (SimpleTokenEstimator.EstimateInput,
// inflightload/token_estimator.go 89–94).
func (a *approxPrefix) inputTokens(req *Request) int64 {
	if n := len(a.tokens(req)); n > 0 {
		return int64(n)
	}
	return int64(req.InputTokens)
}

// add records the request's blocks on endpoint, creating its LRU with the endpoint's
// num_gpu_blocks (auto-tune) or the configured capacity first.
func (a *approxPrefix) add(req *Request, seq uint64, endpoint string) {
	a.counted = 0 // the index changes: the next match recounts
	hs := a.hashes(req, seq)
	if len(hs) == 0 {
		return
	}
	id := a.ids.id(endpoint)
	a.sized = grow(a.sized, int(id)+1)
	a.gpuBlocks = grow(a.gpuBlocks, int(id)+1)
	if !a.sized[id] {
		capacity := a.capacity
		if a.autoTune && a.gpuBlocks[id] > 0 {
			capacity = a.gpuBlocks[id]
		}
		_ = a.index.SetCapacity(id, capacity) // capacity > 0
		a.sized[id] = true
	}
	a.index.Add(hs, id)
}

// remove drops endpoint's index; its LRU is created afresh when it is next added to.
func (a *approxPrefix) remove(endpoint string) {
	if id, ok := a.ids.lookup(endpoint); ok {
		a.index.RemoveEndpoint(id)
		if int(id) < len(a.sized) {
			a.sized[id] = false
		}
	}
}

// estimateBytesPerToken is how many bytes the estimate tokenizer packs into a pseudo-token.
const estimateBytesPerToken = 4

// estimateTokens is llm-d-router v0.10.0's estimate tokenizer (dataproducer/tokenizer/
// estimate.go): the request's bytes packed four to a little-endian pseudo-token, the tail
// zero-padded (packBytes, 314–333). A chat request is its tools as JSON, then each message's
// role followed by its content, with no separator (chatCompletionsBytes, 194–232); kvroute
// takes the tools from the client's body, compacted. Other requests are their prompt text.
func estimateTokens(req *Request, dst []int32, raw []byte) ([]int32, []byte) {
	if req.Messages == nil {
		raw = append(raw, req.Prompt...)
	} else {
		raw = appendTools(raw, req.Body)
		for _, m := range req.Messages {
			raw = append(raw, m.Role...)
			raw = append(raw, m.Content...)
		}
	}
	for len(raw)%estimateBytesPerToken != 0 {
		raw = append(raw, 0)
	}
	for i := 0; i < len(raw); i += estimateBytesPerToken {
		dst = append(dst, int32(binary.LittleEndian.Uint32(raw[i:])))
	}
	return dst, raw
}

// appendTools appends the body's "tools" array, compacted, when there is one.
func appendTools(raw, body []byte) []byte {
	if len(body) == 0 || !bytes.Contains(body, []byte(`"tools"`)) {
		return raw
	}
	var b struct {
		Tools json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(body, &b) != nil || len(b.Tools) == 0 || string(b.Tools) == "null" || string(b.Tools) == "[]" {
		return raw
	}
	var out bytes.Buffer
	if json.Compact(&out, b.Tools) != nil {
		return raw
	}
	return append(raw, out.Bytes()...)
}
