package emulate

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"kvroute/gpumodel"
	"kvroute/internal/vllm"
	"kvroute/sim/engine"
)

// prefillAnswer is the part of a prefill leg's answer the tests read.
type prefillAnswer struct {
	Choices []struct {
		Finish string `json:"finish_reason"`
	} `json:"choices"`
	Usage  wireUsage              `json:"usage"`
	Params *vllm.KVTransferParams `json:"kv_transfer_params"`
}

func postWith(t *testing.T, url, body string, header ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

func held(r *Replica) int {
	n := 0
	r.do(func(c *core) { n = c.eng.Held() })
	return n
}

// TestPrefillDecodeLegs runs a prefill leg on a prefill replica and its decode leg on a
// decode replica: the prefill answers one token, finish_reason length, and vLLM's returned
// params naming itself and the request id; its blocks stay held until the decoder's read
// ends; the decode leg's engine TTFT covers the transfer's base latency.
func TestPrefillDecodeLegs(t *testing.T) {
	const base = 2 * time.Second // virtual; at speed 200 a 10 ms wall wait
	pre, preURL := startReplica(t, func(c *Config) { c.PD = PDConfig{Role: RolePrefill} })
	_, decURL := startReplica(t, func(c *Config) { c.PD = PDConfig{Role: RoleDecode, BaseLatency: base} })
	prompt := strings.Repeat("the quick brown fox jumps over the lazy dog ", 40)
	client := `{"model":"llama-3.1-8b","prompt":"` + prompt + `","max_tokens":8}`
	leg, err := vllm.PrefillBody([]byte(client))
	if err != nil {
		t.Fatal(err)
	}
	resp := postWith(t, preURL+"/v1/completions", string(leg), "X-Request-Id", "req-42")
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var a prefillAnswer
	if err := json.Unmarshal(body, &a); err != nil || resp.StatusCode != 200 {
		t.Fatalf("prefill: status %d body %s: %v", resp.StatusCode, body, err)
	}
	p := a.Params
	switch {
	case p == nil:
		t.Fatalf("prefill answer without kv_transfer_params: %s", body)
	case a.Choices[0].Finish != "length" || a.Usage.CompletionTokens != 1:
		t.Errorf("prefill: finish %q, %d tokens: want length, 1", a.Choices[0].Finish, a.Usage.CompletionTokens)
	case !p.DoRemotePrefill || p.DoRemoteDecode || p.RemoteRequestID != "req-42" || p.TPSize != 1:
		t.Errorf("prefill params %+v", p)
	case len(p.RemoteBlockIDs) < a.Usage.PromptTokens/16:
		t.Errorf("%d block ids for %d prompt tokens", len(p.RemoteBlockIDs), a.Usage.PromptTokens)
	case p.RemoteHost+":"+strconv.Itoa(p.RemotePort) != pre.Addr():
		t.Errorf("params name %s:%d, want the prefill replica %s", p.RemoteHost, p.RemotePort, pre.Addr())
	}
	if n := held(pre); n != 1 {
		t.Fatalf("prefill replica holds %d legs, want 1", n)
	}
	dec, err := vllm.DecodeBody([]byte(client), body[strings.Index(string(body), `"kv_transfer_params":`)+len(`"kv_transfer_params":`):len(body)-1])
	if err != nil {
		t.Fatal(err)
	}
	resp = postWith(t, decURL+"/v1/completions", string(dec), "X-Request-Id", "req-42")
	c := readCompletion(t, resp)
	if c.Status != 200 || c.Usage.CompletionTokens != 8 {
		t.Fatalf("decode leg: %+v", c)
	}
	ttft, _ := strconv.ParseFloat(resp.Header.Get(HeaderEngineTTFT), 64)
	if ttft < base.Seconds() {
		t.Errorf("decode leg engine TTFT %.3fs: want at least the transfer's base latency %v", ttft, base)
	}
	deadline := time.Now().Add(5 * time.Second)
	for held(pre) != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := held(pre); n != 0 {
		t.Errorf("prefill replica still holds %d legs after the decoder read them", n)
	}
}

func TestPrefillRoleRejects(t *testing.T) {
	_, url := startReplica(t, func(c *Config) { c.PD = PDConfig{Role: RolePrefill} })
	for _, tc := range []struct{ name, body, want string }{
		{"no params", `{"model":"llama-3.1-8b","prompt":"hi"}`, "prefill legs only"},
		{"streamed", `{"model":"llama-3.1-8b","prompt":"hi","stream":true,"kv_transfer_params":{"do_remote_decode":true}}`, "Prefill does not support streaming"},
		{"decode leg", `{"model":"llama-3.1-8b","prompt":"hi","kv_transfer_params":{"do_remote_prefill":true}}`, "prefill legs only"},
		{"ill-typed", `{"model":"llama-3.1-8b","prompt":"hi","kv_transfer_params":{"do_remote_decode":"yes"}}`, "kv_transfer_params"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := postWith(t, url+"/v1/completions", tc.body)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), tc.want) {
				t.Errorf("status %d body %s: want 400 with %q", resp.StatusCode, b, tc.want)
			}
		})
	}
}

// TestPDRolesParseAsAggregated sends a P/D replica bodies that Python's json, and so vLLM
// and an aggregated replica, accept: a repeated key (the last one wins) and invalid UTF-8.
// The replica's role must not make it stricter: each role answers each body alike.
func TestPDRolesParseAsAggregated(t *testing.T) {
	const leg = `"kv_transfer_params":{"do_remote_decode":true}`
	for _, tc := range []struct{ name, body string }{
		{"repeated member", `{"model":"llama-3.1-8b","prompt":"hi","prompt":"hello",` + leg + `}`},
		{"repeated kv_transfer_params", `{"model":"llama-3.1-8b","prompt":"hi","kv_transfer_params":{"do_remote_prefill":true},` + leg + `}`},
		{"repeated member in kv_transfer_params", `{"model":"llama-3.1-8b","prompt":"hi","kv_transfer_params":{"do_remote_decode":false,"do_remote_decode":true}}`},
		{"invalid UTF-8 in the prompt", "{\"model\":\"llama-3.1-8b\",\"prompt\":\"caf\xe9\"," + leg + "}"},
		{"invalid UTF-8 in kv_transfer_params", "{\"model\":\"llama-3.1-8b\",\"prompt\":\"hi\",\"kv_transfer_params\":{\"do_remote_decode\":true,\"x\":\"\xff\"}}"},
	} {
		for _, role := range []string{"", RolePrefill, RoleDecode} {
			t.Run(tc.name+"/"+role, func(t *testing.T) {
				_, url := startReplica(t, func(c *Config) { c.PD = PDConfig{Role: role} })
				resp := postWith(t, url+"/v1/completions", tc.body)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("status %d body %s: want 200", resp.StatusCode, b)
				}
			})
		}
	}
}

func TestTransferTime(t *testing.T) {
	cat := gpumodel.DefaultCatalog()
	dep := func(gpu string, tp int) gpumodel.Deployment {
		g, err := cat.GPU(gpu)
		if err != nil {
			t.Fatal(err)
		}
		m, err := cat.Model("llama-3.1-8b")
		if err != nil {
			t.Fatal(err)
		}
		d, err := gpumodel.EngineArgs{}.Deployment(g, m, tp)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	// Llama-3.1-8B moves 131,072 bytes of KV per token (no sliding window): 1,000 tokens are
	// 1.048576 Gbit.
	for _, tc := range []struct {
		name   string
		p      PDConfig
		d      gpumodel.Deployment
		tokens int
		want   time.Duration
	}{
		{"H100's 400G NIC from the catalog", PDConfig{}, dep("H100", 1), 1000, 2621440 * time.Nanosecond},
		{"over four GPUs' links", PDConfig{}, dep("H100", 4), 1000, 655360 * time.Nanosecond},
		{"L4's 100G NIC from the catalog", PDConfig{}, dep("L4", 1), 1000, 10485760 * time.Nanosecond},
		{"configured link and base latency", PDConfig{BandwidthGbps: 100, BaseLatency: time.Millisecond}, dep("H100", 1), 1000, 11485760 * time.Nanosecond},
		{"nothing to read", PDConfig{BaseLatency: 50 * time.Millisecond}, dep("H100", 1), 0, 50 * time.Millisecond},
	} {
		if got := tc.p.transferTime(tc.tokens, tc.d); got != tc.want {
			t.Errorf("%s: transferTime(%d) = %v, want %v", tc.name, tc.tokens, got, tc.want)
		}
	}
}

// TestHeldLegsStayBounded puts many legs of which the engine keeps only the newest few, as
// when no decoder reads them and the abort timeout frees them: the map stays within twice
// what the engine holds (or the least pruning size), and the legs still held stay.
func TestHeldLegsStayBounded(t *testing.T) {
	var h heldLegs
	reqs := make([]*engine.Request, 1000)
	const keep = 10 // the engine holds the newest keep legs
	n := 0
	holds := func(legs []*engine.Request) []bool {
		held := make([]bool, len(legs))
		for i, leg := range legs {
			held[i] = slices.Index(reqs[:n], leg) >= n-keep
		}
		return held
	}
	for i := range reqs {
		reqs[i] = &engine.Request{ID: strconv.Itoa(i)}
		n = i + 1
		h.put(reqs[i].ID, reqs[i], holds)
		if len(h.legs) > 2*minHeldPrune {
			t.Fatalf("after %d legs the map holds %d, want at most %d", n, len(h.legs), 2*minHeldPrune)
		}
	}
	for _, r := range reqs[len(reqs)-keep:] {
		if h.take(r.ID) != r {
			t.Fatalf("leg %s the engine still holds was pruned", r.ID)
		}
	}
}
