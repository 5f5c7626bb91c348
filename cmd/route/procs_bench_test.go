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

	"kvroute/internal/benchtest"
	"kvroute/internal/nettest"
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
		err := (&http.Server{Addr: os.Getenv(argsEnv), Handler: benchtest.Handler()}).ListenAndServe()
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	case "route":
		signals := make(chan os.Signal, 4)
		signal.Notify(signals, syscall.SIGHUP, syscall.SIGTERM, syscall.SIGINT)
		os.Exit(run(context.Background(), strings.Fields(os.Getenv(argsEnv)), env{stdout: os.Stdout, stderr: os.Stderr, signals: signals}))
	}
	os.Exit(m.Run())
}

// baselineEnv names a route binary to measure beside this one, for comparisons across
// versions in the same run ("route-baseline" rows), e.g. one built from an earlier commit.
const baselineEnv = "KVROUTE_BENCH_ROUTE_BASELINE"

// BenchmarkProcesses measures the router as it is deployed: the backend (internal/benchtest's
// trivial OpenAI-shaped server), the router (policy prefix-score) and nginx (when installed,
// as the reference) each in a process of its own, the closed-loop load in this one, all on
// the same machine, for chat bodies of 2 KB, 32 KB and 220 KB at concurrency 1, 64 and 150.
// Besides the latency and throughput of internal/gateway's BenchmarkProxy, each row reports
// the CPU time per request of the proxy's process (router or nginx): cpu-µs/req.
func BenchmarkProcesses(b *testing.B) {
	type target struct {
		name, url string
		cpu       benchtest.CPUClock
	}
	be := nettest.FreeAddr(b)
	startSelf(b, "backend", be, be)
	targets := []target{{"direct", "http://" + be, nil}}
	flags := func(addr string) string {
		return fmt.Sprintf("-listen %s -backends http://%s -policy prefix-score -log-level warn", addr, be)
	}
	addr := nettest.FreeAddr(b)
	pid := startSelf(b, "route", addr, flags(addr)+" -drain-delay 0s")
	targets = append(targets, target{"route", "http://" + addr, benchtest.ProcessCPU(pid)})
	if bin := os.Getenv(baselineEnv); bin != "" {
		addr := nettest.FreeAddr(b)
		pid := startBinary(b, "route-baseline", addr, bin, strings.Fields(flags(addr))...)
		targets = append(targets, target{"route-baseline", "http://" + addr, benchtest.ProcessCPU(pid)})
	}
	if ngx, pid := benchtest.Nginx(b, be); ngx != "" {
		targets = append(targets, target{"nginx", ngx, benchtest.ProcessCPU(pid)})
	}
	client := benchtest.Client()
	for _, size := range benchtest.Sizes {
		body := benchtest.ChatBody(size)
		for _, conc := range []int{1, 64, 150} {
			for _, t := range targets {
				b.Run(fmt.Sprintf("size=%dK/c=%d/%s", size>>10, conc, t.name), func(b *testing.B) {
					benchtest.Run(b, client, t.url+"/v1/chat/completions", body, conc, t.cpu)
				})
			}
		}
	}
}

// startSelf runs this test binary as role with args, stopped with SIGTERM when b ends, waits
// for it to listen on addr, and returns its process id.
func startSelf(b *testing.B, role, addr, args string) int {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, argsEnv+"="+args)
	return startCmd(b, role, addr, cmd)
}

// startBinary runs bin with args as startSelf runs this binary.
func startBinary(b *testing.B, name, addr, bin string, args ...string) int {
	return startCmd(b, name, addr, exec.Command(bin, args...))
}

func startCmd(b *testing.B, name, addr string, cmd *exec.Cmd) int {
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() })
	benchtest.WaitListening(b, name, addr)
	return cmd.Process.Pid
}
