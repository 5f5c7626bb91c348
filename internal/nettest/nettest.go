// Package nettest holds the helpers tests use over real sockets on loopback: a free port to
// bind, and a bounded wait for a condition another goroutine brings about.
package nettest

import (
	"net"
	"testing"
	"time"
)

// FreeAddr returns a loopback address ("127.0.0.1:port") whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// WaitFor polls cond every 5 ms until it holds, and fails t, naming what it waited for, if it
// does not within 10 s: long enough for a subscription or a scrape on a loaded machine.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
