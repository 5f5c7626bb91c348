package main

import (
	"context"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"kvroute/internal/nettest"
)

// A KV-event setup the router cannot honour stops it before it serves: a bind address
// another process holds (a second router against publishers that dial), and replay asked
// for a stream the router does not dial.
func TestKVEventsStartupErrors(t *testing.T) {
	a := backend(t, "a", nil, nil)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	cases := []struct {
		name     string
		args     []string
		wantCode int
		wantLog  string
	}{
		{"bind busy", []string{"-kv-events-bind", "tcp://" + busy.Addr().String()}, 1, "address already in use"},
		{"replay with bind", []string{"-kv-events-bind", "tcp://" + nettest.FreeAddr(t), "-kv-events-replay", "a=tcp://127.0.0.1:1"},
			2, `kv_events.replay[0]: "a" has no kv_events.connect entry`},
		{"forward without bind", []string{"-kv-events-forward", "tcp://" + nettest.FreeAddr(t)}, 2, "kv_events.forward"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logs := &syncBuffer{}
			signals, listening, exit := make(chan os.Signal, 1), make(chan string, 1), make(chan int, 1)
			args := append([]string{"-listen", "127.0.0.1:0", "-drain-delay", "0s", "-backends", "a=" + a.URL, "-policy", "precise-prefix"}, tc.args...)
			go func() {
				exit <- run(context.Background(), args, env{stdout: io.Discard, stderr: logs, signals: signals,
					listening: func(addr string) { listening <- addr }})
			}()
			var code int
			select {
			case code = <-exit:
			case <-listening:
				signals <- syscall.SIGTERM
				<-exit
				t.Fatalf("the router served; logs:\n%s", logs)
			}
			if code != tc.wantCode || !strings.Contains(logs.String(), tc.wantLog) {
				t.Errorf("exit %d, want %d; logs, want %q:\n%s", code, tc.wantCode, tc.wantLog, logs)
			}
		})
	}
}
