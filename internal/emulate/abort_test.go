package emulate

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestClientDisconnectAborts checks that a request whose client goes away stops occupying
// the engine, streamed (after its first token) or not (while it decodes), as vLLM aborts it:
// at real-time speed each would otherwise decode for about half a minute.
func TestClientDisconnectAborts(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(map[bool]string{true: "streamed", false: "whole"}[stream], func(t *testing.T) {
			r, base := startReplica(t, func(c *Config) { c.Speed = 1 })
			ctx, cancel := context.WithCancel(t.Context())
			body := `{"max_tokens":4000,"stream":` + map[bool]string{true: "true", false: "false"}[stream] +
				`,"messages":[{"role":"user","content":"tell me everything"}]}`
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			done := make(chan error, 1)
			go func() {
				resp, err := client().Do(req)
				if err == nil {
					if stream {
						_, err = bufio.NewReader(resp.Body).ReadString('\n') // the first event
					}
					cancel()
					resp.Body.Close()
				}
				done <- err
			}()
			if stream {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			} else {
				waitFor(t, r, func(s snapshot) bool { return s.Running == 1 && s.GenerationTokens > 0 })
				cancel()
				<-done
			}
			s := waitFor(t, r, func(s snapshot) bool { return s.Running == 0 && s.Waiting == 0 })
			if s.Completed != 0 || s.Success != 0 || s.GenerationTokens >= 4000 {
				t.Errorf("after the abort: completed %d, success %d, %d tokens generated; want an aborted request",
					s.Completed, s.Success, s.GenerationTokens)
			}
		})
	}
}

// waitFor polls the replica's metrics until ok holds, failing the test after 10 s.
func waitFor(t *testing.T, r *Replica, ok func(snapshot) bool) snapshot {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var s snapshot
		r.do(func(c *core) { s = c.snapshot() })
		if ok(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("replica state never reached the expected one: running %d, waiting %d, %d tokens generated",
				s.Running, s.Waiting, s.GenerationTokens)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
