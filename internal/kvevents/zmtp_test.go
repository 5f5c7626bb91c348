package kvevents

import (
	"errors"
	"io"
	"net"
	"testing"

	"github.com/go-zeromq/zmq4"
	"github.com/go-zeromq/zmq4/security/null"
)

// verdict feeds b to a fresh parser in chunks of n bytes (n <= 0: all at once) and returns
// the reason of the first violation, or -1 when there is none.
func verdict(lim WireLimits, b []byte, n int) (WireReason, int) {
	p := newZMTPParser(lim, zmq4.Sub)
	if n <= 0 {
		n = max(len(b), 1)
	}
	for off := 0; off < len(b); off += n {
		if err := p.feed(b[off:min(off+n, len(b))]); err != nil {
			var we *WireError
			if !errors.As(err, &we) {
				panic(err)
			}
			return we.Reason, off
		}
	}
	return 0, -1
}

func TestZMTPParser(t *testing.T) {
	kb := make([]byte, 1000)
	good := append(zmtpHello("PUB"), zmtpMessage([]byte("kv@p@m"), make([]byte, 8), kb)...)
	v31 := zmtpGreeting()
	v31[11] = 1
	for _, tc := range []struct {
		name string
		b    []byte
		ok   bool
		want WireReason
	}{
		{"vLLM's three frames", good, true, 0},
		{"ZMTP 3.1", append(v31, zmtpReady("XPUB")...), true, 0},
		{"an empty frame", append(zmtpHello("PUB"), zmtpMessage(nil)...), true, 0},
		{"a PING command between messages", append(good, zmtpFrame(0x04, append([]byte{4}, "PING"...))...), true, 0},
		{"ZMTP 2", func() []byte { g := zmtpGreeting(); g[10] = 2; return g }(), false, WireProtocol},
		{"no signature", make([]byte, 64), false, WireProtocol},
		{"a command inside a message", append(append(zmtpHello("PUB"), zmtpFrame(1, nil)...), zmtpFrame(0x04, []byte{0})...), false, WireProtocol},
		{"a command with MORE", append(zmtpHello("PUB"), zmtpFrame(0x05, []byte{0})...), false, WireProtocol},
		{"an unknown socket type", zmtpHello("FOO"), false, WireProtocol},
		{"socket-type in lower case", append(zmtpGreeting(), zmtpFrame(0x04, append(append([]byte{5}, "READY"...), zmtpProp("socket-type", "PUB")...))...), true, 0},
		{"a Socket-Type zmq4 does not look up", append(zmtpGreeting(), zmtpFrame(0x04, append(append([]byte{5}, "READY"...), zmtpProp("SoCket-TYpe", "PUB")...))...), false, WireProtocol},
		{"a second Socket-Type of an unknown type", append(zmtpGreeting(), zmtpFrame(0x04, append(append(append([]byte{5}, "READY"...), zmtpProp("Socket-Type", "PUB")...), zmtpProp("socket-type", "FOO")...))...), false, WireProtocol},
		{"READY without Socket-Type", append(zmtpGreeting(), zmtpFrame(0x04, append([]byte{5}, "READY"...))...), false, WireProtocol},
		{"a property name of length 0", append(zmtpGreeting(), zmtpFrame(0x04, append([]byte{5}, "READY\x00\x00\x00\x00\x00"...))...), false, WireProtocol},
		{"a frame one byte over", append(zmtpHello("PUB"), zmtpFrame(0, make([]byte, 1025))...), false, WireFrameTooLarge},
		{"a frame at the limit", append(zmtpHello("PUB"), zmtpFrame(0, make([]byte, 1024))...), true, 0},
		{"frames past the message's bytes", append(zmtpHello("PUB"), zmtpMessage(kb, kb, kb)...), false, WireMessageTooLarge},
		{"five frames", append(zmtpHello("PUB"), zmtpMessage(nil, nil, nil, nil, nil)...), false, WireTooManyFrames},
		{"four frames twice", append(zmtpHello("PUB"), append(zmtpMessage(nil, nil, nil, nil), zmtpMessage(nil, nil, nil, nil)...)...), true, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, n := range []int{0, 1, 2, 7, 64} { // the verdict does not depend on chunking
				got, at := verdict(small(), tc.b, n)
				if ok := at < 0; ok != tc.ok || !ok && got != tc.want {
					t.Fatalf("chunks of %d: ok %v reason %v, want ok %v reason %v", n, ok, got, tc.ok, tc.want)
				}
			}
		})
	}
}

// zmq4Behind runs zmq4's own reader (zmq4.Open, then RecvMsg until an error) over b, as the
// peer's bytes, behind a guardConn: whatever b is, zmq4 must not panic, and with the guard's
// limits it cannot allocate more than a frame's bound at once.
func zmq4Behind(lim WireLimits, b []byte) error {
	ours, theirs := net.Pipe()
	defer ours.Close()
	go func() { _, _ = theirs.Write(b); theirs.Close() }()
	go func() { _, _ = io.Copy(io.Discard, theirs) }() // what zmq4 writes: greeting, READY, PONG
	g := &guard{lim: lim, own: zmq4.Sub, count: func(WireReason) {}}
	c, err := zmq4.Open(g.wrap(ours, nil), null.Security(), zmq4.Sub, zmq4.SocketIdentity("fuzz"), false, nil)
	if err != nil {
		return err
	}
	for {
		if _, err := c.RecvMsg(); err != nil {
			return err
		}
	}
}

func FuzzZMTPGuard(f *testing.F) {
	f.Add(append(zmtpHello("PUB"), zmtpMessage([]byte("kv@p@m"), make([]byte, 8), []byte{0x90})...), uint8(3))
	f.Add(append(zmtpHello("PUB"), longHeader(0, 1<<62)...), uint8(1))
	f.Add(append(zmtpGreeting(), zmtpFrame(0x04, append([]byte{5}, "READY\x0bSocket-Type"...))...), uint8(0))
	f.Add(append(zmtpHello("PUB"), zmtpMessage(nil, nil, nil, nil, nil)...), uint8(9))
	lim := small()
	lim.HandshakeTimeout = 0
	f.Fuzz(func(t *testing.T, b []byte, chunk uint8) {
		whole, at := verdict(lim, b, 0)
		split, at2 := verdict(lim, b, int(chunk))
		if (at < 0) != (at2 < 0) || at >= 0 && whole != split {
			t.Fatalf("whole: %v at %d; in chunks of %d: %v at %d", whole, at, chunk, split, at2)
		}
		_ = zmq4Behind(lim, b) // a panic in zmq4 fails the fuzz run
	})
}
