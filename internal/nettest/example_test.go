package nettest_test

import (
	"fmt"
	"net"
	"testing"

	"kvroute/internal/nettest"
)

func ExampleFreeAddr() {
	t := &testing.T{}
	ln, err := net.Listen("tcp", nettest.FreeAddr(t))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer ln.Close()
	ready := make(chan struct{})
	go func() { close(ready) }()
	nettest.WaitFor(t, "the listener's goroutine", func() bool {
		select {
		case <-ready:
			return true
		default:
			return false
		}
	})
	fmt.Println("listening on loopback:", ln.Addr().(*net.TCPAddr).IP.IsLoopback())
	// Output: listening on loopback: true
}
