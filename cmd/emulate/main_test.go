package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"defaults", nil, ""},
		{"smoke", []string{"-replicas", "1", "-base-port", "9000", "-gpu", "H100-SXM-80GB", "-model", "llama-3.1-8b"}, ""},
		{"fleet", []string{"-replicas", "4", "-speed", "10", "-num-blocks", "500", "-tp", "2"}, ""},
		{"no replicas", []string{"-replicas", "0"}, "-replicas"},
		{"ports overflow", []string{"-replicas", "4", "-base-port", "65534"}, "-base-port"},
		{"bad model", []string{"-model", "gpt-4"}, "unknown model"},
		{"bad speed", []string{"-speed", "0"}, "speed"},
		{"vllm release", []string{"-vllm", "v0.8-v0.10"}, ""},
		{"unknown vllm release", []string{"-vllm", "v0.5"}, "unknown vLLM release"},
		{"stray argument", []string{"extra"}, "unexpected arguments"},
		{"unknown flag", []string{"-nope"}, "not defined"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseFlags(tc.args, io.Discard)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("parseFlags(%q) = %v", tc.args, err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("parseFlags(%q) = %v, want an error about %q", tc.args, err, tc.wantErr)
			}
		})
	}
}

func TestStartServesEveryReplica(t *testing.T) {
	o, err := parseFlags([]string{"-replicas", "2", "-base-port", "0", "-speed", "100", "-admin-listen", "127.0.0.1:0",
		"-served-model-name", "llama-3.1-8b"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	reps, admin, err := start(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := stop(reps, admin); err != nil {
			t.Error(err)
		}
	}()
	resp, err := http.Get("http://" + admin.Addr + "/replicas")
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	err = json.NewDecoder(resp.Body).Decode(&urls)
	resp.Body.Close()
	if err != nil || len(urls) != 2 {
		t.Fatalf("GET /replicas: %v, %v", urls, err)
	}
	for _, u := range urls {
		resp, err := http.Get(u + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), "\nvllm:num_requests_running{") {
			t.Errorf("%s/metrics lacks vllm:num_requests_running:\n%s", u, b)
		}
	}
	resp, err = http.Post("http://"+admin.Addr+"/replicas/1/admin/fail", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if !reps[1].Down() || reps[0].Down() {
		t.Errorf("after failing replica 1: down %v, %v", reps[0].Down(), reps[1].Down())
	}
	resp, err = http.Post("http://"+admin.Addr+"/replicas/1/admin/recover", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if _, err := http.Get(urls[1] + "/health"); err != nil {
		t.Errorf("replica 1 after recovery: %v", err)
	}
}

func TestRunStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var log strings.Builder
	if code := run(ctx, []string{"-base-port", "0", "-replicas", "3"}, &log); code != 0 {
		t.Errorf("run = %d, want 0; log:\n%s", code, log.String())
	}
	if got := strings.Count(log.String(), "replica serving"); got != 3 {
		t.Errorf("%d replicas logged serving, want 3:\n%s", got, log.String())
	}
	if code := run(ctx, []string{"-replicas", "0"}, io.Discard); code != 2 {
		t.Errorf("run with bad flags = %d, want 2", code)
	}
}
