package main

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
)

// TestReloadWarnsOnServerChanges sends SIGHUP with the server settings unchanged, then
// changed: only the second reload warns that they take a restart, even when max_connections
// was lowered to fit the file descriptor limit.
func TestReloadWarnsOnServerChanges(t *testing.T) {
	a := backend(t, "a", nil, nil)
	const warning = "server changes need a restart"
	file := func(server string) string {
		return "listen: 127.0.0.1:0\ndrain_delay: 0s\nserver: {" + server + "}\nbackends: [" + a.URL + "]\n"
	}
	lowered := "max_connections: 1000000000" // over any file descriptor limit: lowered at start
	cfgPath := writeFile(t, "route.yaml", file(lowered))
	signals, addrs, reloads, exit := make(chan os.Signal), make(chan string, 1), make(chan error, 1), make(chan int, 1)
	var logs syncBuffer
	go func() {
		exit <- run(context.Background(), []string{"-config", cfgPath}, env{stderr: &logs, signals: signals,
			listening: func(addr string) { addrs <- addr }, reloaded: func(err error) { reloads <- err }})
	}()
	<-addrs
	for _, tc := range []struct {
		name, server string
		warn         bool
	}{
		{"unchanged", lowered, false},
		{"unchanged again", lowered, false},
		{"idle_timeout changed", lowered + ", idle_timeout: 30s", true},
	} {
		if err := os.WriteFile(cfgPath, []byte(file(tc.server)), 0o644); err != nil {
			t.Fatal(err)
		}
		before := strings.Count(logs.String(), warning)
		signals <- syscall.SIGHUP
		if err := <-reloads; err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if warned := strings.Count(logs.String(), warning) > before; warned != tc.warn {
			t.Errorf("%s: warned %v, want %v; log:\n%s", tc.name, warned, tc.warn, logs.String())
		}
	}
	signals <- syscall.SIGTERM
	if code := <-exit; code != 0 {
		t.Errorf("exit code %d", code)
	}
}
