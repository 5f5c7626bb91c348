package kvevents

import (
	"encoding/binary"
	"net"
	"testing"
)

// The raw ZMTP 3.0 pieces a hostile peer sends (rfc.zeromq.org/spec/23: greeting, NULL
// READY command, frames), written by hand so a test can break them on purpose.

// zmtpGreeting is a 64-byte ZMTP 3.0 greeting with the NULL mechanism.
func zmtpGreeting() []byte {
	g := make([]byte, 64)
	g[0], g[9] = 0xFF, 0x7F
	g[10], g[11] = 3, 0
	copy(g[12:32], "NULL")
	return g
}

// zmtpProp is one metadata property of a READY command.
func zmtpProp(name, value string) []byte {
	b := append([]byte{byte(len(name))}, name...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(value)))
	return append(b, value...)
}

// zmtpReady is a READY command frame announcing sockType.
func zmtpReady(sockType string) []byte {
	body := append([]byte{5}, "READY"...)
	body = append(body, zmtpProp("Socket-Type", sockType)...)
	return zmtpFrame(0x04, body)
}

// zmtpFrame is one frame with the given flags (MORE 0x01, COMMAND 0x04); the LONG flag is
// set from the body's length.
func zmtpFrame(flags byte, body []byte) []byte {
	if len(body) > 255 {
		b := binary.BigEndian.AppendUint64([]byte{flags | 0x02}, uint64(len(body)))
		return append(b, body...)
	}
	return append([]byte{flags, byte(len(body))}, body...)
}

// zmtpMessage is a message of the given frames, MORE set on all but the last.
func zmtpMessage(frames ...[]byte) []byte {
	var b []byte
	for i, f := range frames {
		var more byte
		if i < len(frames)-1 {
			more = 0x01
		}
		b = append(b, zmtpFrame(more, f)...)
	}
	return b
}

// zmtpHello is what a peer sends first: greeting and READY.
func zmtpHello(sockType string) []byte { return append(zmtpGreeting(), zmtpReady(sockType)...) }

// dialRaw opens a TCP connection to addr (host:port) and sends b.
func dialRaw(t *testing.T, addr string, b []byte) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := c.Write(b); err != nil {
		t.Fatal(err)
	}
	return c
}
