package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"kvroute/internal/benchload"
)

// The environment that makes this test binary play one process of BenchmarkProcesses.
const (
	roleEnv = "KVROUTE_BENCH_ROLE" // "backend" or "route"
	argsEnv = "KVROUTE_BENCH_ARGS" // the backend's address, or the router's flags
)

// TestMain runs the tests, or, under roleEnv, this binary as the benchmark's backend or router.
func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "backend":
		err := (&http.Server{Addr: os.Getenv(argsEnv), Handler: benchload.Handler()}).ListenAndServe()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	case "route":
		signals := make(chan os.Signal, 4)
		signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
		os.Exit(run(context.Background(), strings.Fields(os.Getenv(argsEnv)), env{stderr: os.Stderr, signals: signals}))
	}
	os.Exit(m.Run())
}

// BenchmarkProcesses measures the router as it is deployed: the backend (internal/benchload's
// trivial OpenAI-shaped server), the router (policy prefix-score, lean and std front ends)
// and nginx (when installed, as the reference) each in a process of its own, the closed-loop
// load in this one, all on the same machine. Rows and metrics are those of internal/gateway's
// BenchmarkProxy, where client, proxy and backend share one process.
func BenchmarkProcesses(b *testing.B) {
	type target struct{ name, url string }
	be := benchload.FreeAddr(b)
	startSelf(b, "backend", be, be)
	targets := []target{{"direct", "http://" + be}}
	for _, server := range []string{"lean", "std"} {
		addr := benchload.FreeAddr(b)
		startSelf(b, "route", addr, fmt.Sprintf("-listen %s -backends http://%s -policy prefix-score -log-level warn -http-server %s", addr, be, server))
		targets = append(targets, target{"route-" + server, "http://" + addr})
	}
	if ngx := benchload.Nginx(b, be); ngx != "" {
		targets = append(targets, target{"nginx", ngx})
	}
	body, client := benchload.ChatBody(), benchload.Client()
	for _, conc := range []int{1, 64} {
		for _, t := range targets {
			b.Run(fmt.Sprintf("c=%d/%s", conc, t.name), func(b *testing.B) {
				benchload.Run(b, client, t.url+"/v1/chat/completions", body, conc)
			})
		}
	}
}

// startSelf runs this test binary as role with args, stopped with SIGTERM when b ends, and
// waits for it to listen on addr.
func startSelf(b *testing.B, role, addr, args string) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, argsEnv+"="+args)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	benchload.WaitListening(b, role, addr)
}
