package gateway

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"kvroute/internal/vllm"
)

// legLog records what P/D fakes received: each leg's body and X-Request-Id.
type legLog struct {
	mu   sync.Mutex
	legs []leg
}

type leg struct {
	backend, id, prefiller string
	body                   []byte
}

func (l *legLog) add(backend string, r *http.Request, body []byte) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.legs = append(l.legs, leg{backend, r.Header.Get("X-Request-Id"), r.Header.Get("x-prefiller-host-port"), body})
}

func (l *legLog) all() []leg {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]leg(nil), l.legs...)
}

// prefillFake answers prefill legs as vLLM does: finish_reason length, one token, and
// kv_transfer_params naming where its blocks wait; answer, when set, replaces the body.
func prefillFake(t *testing.T, name string, log *legLog, answer string) *fake {
	f := newFake(t, name)
	h := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		log.add(name, r, body)
		w.Header().Set("Content-Type", "application/json")
		if answer != "" {
			_, _ = io.WriteString(w, answer)
			return
		}
		fmt.Fprintf(w, `{"id":"x","choices":[{"index":0,"text":"a","finish_reason":"length"}],`+
			`"kv_transfer_params":{"do_remote_prefill":true,"do_remote_decode":false,"remote_block_ids":[1,2],"remote_engine_id":%q,"remote_request_id":%q,"remote_host":"127.0.0.1","remote_port":5600,"tp_size":1},`+
			`"usage":{"prompt_tokens":40,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":32}}}`, name, r.Header.Get("X-Request-Id"))
	}
	f.handlers = map[string]http.HandlerFunc{"/v1/chat/completions": h, "/v1/completions": h}
	return f
}

// decodeFake is a fake that records its legs before answering as fakes do.
func decodeFake(t *testing.T, name string, log *legLog) *fake {
	f := newFake(t, name)
	h := func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		log.add(name, r, body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		f.complete(w, r, r.URL.Path == "/v1/chat/completions")
	}
	f.handlers = map[string]http.HandlerFunc{"/v1/chat/completions": h, "/v1/completions": h}
	return f
}

func pdConfig(mode string, prefill, decode []*fake) Config {
	cfg := testConfig("first-ready", append(append([]*fake{}, prefill...), decode...)...)
	cfg.PD = PDConfig{Mode: mode, Roles: map[string]string{}}
	for _, f := range prefill {
		cfg.PD.Roles[f.name] = RolePrefill
	}
	for _, f := range decode {
		cfg.PD.Roles[f.name] = RoleDecode
	}
	return cfg
}

func TestTwoStep(t *testing.T) {
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			log := &legLog{}
			p, d := prefillFake(t, "p0", log, ""), decodeFake(t, "d0", log)
			h := start(t, pdConfig(PDTwoStep, []*fake{p}, []*fake{d}))
			client := chatBody("hello", stream, `,"min_tokens":2,"stream_options":{"include_usage":true}`)
			if !stream {
				client = chatBody("hello", stream, `,"min_tokens":2`)
			}
			r := h.post(t, "/v1/chat/completions", client)
			if r.status != 200 || strings.Count(r.body, "tok")-strings.Count(r.body, "tokens") != 4 {
				t.Fatalf("status %d body %s", r.status, r.body)
			}
			legs := log.all()
			if len(legs) != 2 || legs[0].backend != "p0" || legs[1].backend != "d0" {
				t.Fatalf("legs %+v, want p0 then d0", legs)
			}
			if legs[0].id == "" || legs[0].id != legs[1].id {
				t.Errorf("X-Request-Id: prefill %q, decode %q: want the same, not empty", legs[0].id, legs[1].id)
			}
			want, _ := vllm.PrefillBody([]byte(client))
			if string(legs[0].body) != string(want) {
				t.Errorf("prefill body %s, want %s", legs[0].body, want)
			}
			var dec map[string]any
			if err := json.Unmarshal(legs[1].body, &dec); err != nil {
				t.Fatal(err)
			}
			params := dec["kv_transfer_params"].(map[string]any)
			if params["do_remote_prefill"] != true || params["remote_engine_id"] != "p0" || params["remote_request_id"] != legs[0].id {
				t.Errorf("decode leg params %v: want the prefill answer's", params)
			}
			if (dec["stream"] == true) != stream || dec["max_tokens"] != 4.0 {
				t.Errorf("decode leg %v: want the client's stream and max_tokens", dec)
			}
			h.waitHandled(t, 1)
			h.assertNoInFlight(t)
		})
	}
}

func TestTwoStepPrefillRetried(t *testing.T) {
	log := &legLog{}
	p0, p1, d := prefillFake(t, "p0", log, ""), prefillFake(t, "p1", log, ""), decodeFake(t, "d0", log)
	h := start(t, pdConfig(PDTwoStep, []*fake{p0, p1}, []*fake{d}))
	p0.kill()
	r := h.post(t, "/v1/completions", `{"model":"`+fakeModel+`","prompt":"hi","max_tokens":2}`)
	if r.status != 200 {
		t.Fatalf("status %d body %s", r.status, r.body)
	}
	legs := log.all()
	if len(legs) != 2 || legs[0].backend != "p1" || legs[1].backend != "d0" {
		t.Fatalf("legs %+v, want p1 then d0", legs)
	}
	p1.kill()
	r = h.post(t, "/v1/completions", `{"model":"`+fakeModel+`","prompt":"hi","max_tokens":2}`)
	if r.status != http.StatusBadGateway || !strings.Contains(r.body, "prefill_failed") {
		t.Errorf("every prefill backend down: status %d body %s, want 502 prefill_failed", r.status, r.body)
	}
	h.waitHandled(t, 2)
	h.assertNoInFlight(t)
}

func TestTwoStepHostilePrefill(t *testing.T) {
	huge := `{"kv_transfer_params":{"remote_block_ids":[` + strings.Repeat("1,", vllm.MaxKVTransferParamsBytes) + `1]}}`
	for _, tc := range []struct{ name, answer, want string }{
		{"missing params", `{"choices":[]}`, "no kv_transfer_params"},
		{"params not an object", `{"kv_transfer_params":"x"}`, "not a JSON object"},
		{"malformed", `{"kv_transfer_params":{`, "prefill response"},
		{"huge", huge, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			log := &legLog{}
			p, d := prefillFake(t, "p0", log, tc.answer), decodeFake(t, "d0", log)
			cfg := pdConfig(PDTwoStep, []*fake{p}, []*fake{d})
			h := start(t, cfg)
			r := h.post(t, "/v1/completions", `{"model":"`+fakeModel+`","prompt":"hi"}`)
			if r.status != http.StatusBadGateway || !strings.Contains(r.body, tc.want) || len(r.body) > 4096 {
				t.Errorf("status %d body %.300s: want 502 naming %q, short", r.status, r.body, tc.want)
			}
			for _, l := range log.all() {
				if l.backend == "d0" {
					t.Errorf("the decode backend got a leg after a failed prefill")
				}
			}
			h.waitHandled(t, 1)
			h.assertNoInFlight(t)
		})
	}
}

func TestTwoStepPrefillRefusalReachesClient(t *testing.T) {
	log := &legLog{}
	p, d := prefillFake(t, "p0", log, ""), decodeFake(t, "d0", log)
	p.handlers["/v1/completions"] = func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":{"message":"prompt too long","type":"BadRequestError","code":400}}`)
	}
	h := start(t, pdConfig(PDTwoStep, []*fake{p}, []*fake{d}))
	r := h.post(t, "/v1/completions", `{"model":"`+fakeModel+`","prompt":"hi"}`)
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "prompt too long") {
		t.Errorf("status %d body %s: want the prefill backend's 400", r.status, r.body)
	}
	h.waitHandled(t, 1)
	h.assertNoInFlight(t)
}

func TestSidecar(t *testing.T) {
	log := &legLog{}
	p, d := prefillFake(t, "p0", log, ""), decodeFake(t, "d0", log)
	h := start(t, pdConfig(PDSidecar, []*fake{p}, []*fake{d}))
	body := chatBody("hello", true, "")
	r := h.post(t, "/v1/chat/completions", body)
	if r.status != 200 {
		t.Fatalf("status %d body %s", r.status, r.body)
	}
	legs := log.all()
	if len(legs) != 1 || legs[0].backend != "d0" {
		t.Fatalf("legs %+v: want the decode backend only", legs)
	}
	if got, want := legs[0].prefiller, p.addr; got != want {
		t.Errorf("x-prefiller-host-port %q, want %q", got, want)
	}
	if string(legs[0].body) != body {
		t.Errorf("decode body %s, want the client's %s", legs[0].body, body)
	}
	h.waitHandled(t, 1)
	h.assertNoInFlight(t)
}

func TestPDDeciderLocal(t *testing.T) {
	log := &legLog{}
	p, d := prefillFake(t, "p0", log, ""), decodeFake(t, "d0", log)
	cfg := pdConfig(PDTwoStep, []*fake{p}, []*fake{d})
	cfg.PD.Decider = PolicyRef{Name: "never"}
	h := start(t, cfg)
	body := chatBody("hello", false, "")
	if r := h.post(t, "/v1/chat/completions", body); r.status != 200 {
		t.Fatalf("status %d body %s", r.status, r.body)
	}
	legs := log.all()
	if len(legs) != 1 || legs[0].backend != "d0" || string(legs[0].body) != body {
		t.Errorf("legs %+v: want the client's body on d0 only", legs)
	}
}

func TestPDConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		pd   PDConfig
		want []string
	}{
		{"ok", PDConfig{Mode: PDTwoStep, Roles: map[string]string{"a": RolePrefill}}, nil},
		{"roles without mode", PDConfig{Roles: map[string]string{"a": RolePrefill}}, []string{"pd.roles: set without pd.mode"}},
		{"bad mode and role", PDConfig{Mode: "x", Roles: map[string]string{"a": "both", "zz": RoleDecode}},
			[]string{`pd.mode "x"`, `pd.roles[a] "both"`, "pd.roles[zz]: no backend"}},
		{"no decoder", PDConfig{Mode: PDSidecar, Roles: map[string]string{"a": RolePrefill, "http://b:1": RolePrefill}},
			[]string{"want at least one decode backend"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Backends = []string{"a=http://a:1", "b=http://b:1"}
			cfg.PD = tc.pd
			err := cfg.Validate()
			if (err == nil) != (tc.want == nil) {
				t.Fatalf("err %v, want %v", err, tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("err %v: want %q", err, w)
				}
			}
		})
	}
}

func TestPDReload(t *testing.T) {
	log := &legLog{}
	p0, p1, d := prefillFake(t, "p0", log, ""), prefillFake(t, "p1", log, ""), decodeFake(t, "d0", log)
	cfg := pdConfig(PDTwoStep, []*fake{p0}, []*fake{d})
	h := start(t, cfg)
	grown := pdConfig(PDTwoStep, []*fake{p1, p0}, []*fake{d}) // p1 first: first-ready picks it
	if err := h.g.Reload(grown); err != nil {
		t.Fatal(err)
	}
	if r := h.post(t, "/v1/completions", `{"model":"`+fakeModel+`","prompt":"hi"}`); r.status != 200 {
		t.Fatalf("status %d body %s", r.status, r.body)
	}
	if legs := log.all(); len(legs) != 2 || legs[0].backend != "p1" {
		t.Errorf("legs %+v: want the reloaded prefill pool's first backend, p1", legs)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"to aggregated", func(c *Config) { c.PD = PDConfig{} }, "takes a restart"},
		{"decider", func(c *Config) { c.PD.Decider = PolicyRef{Name: "never"} }, "takes a restart"},
	} {
		c := grown
		c.PD.Roles = grown.PD.Roles
		tc.edit(&c)
		if err := h.g.Reload(c); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want %q", tc.name, err, tc.want)
		}
	}
}
