package kvevents

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-zeromq/zmq4"
)

// WireLimits bound what the peers of one event socket can make the router hold, whatever
// their frame headers announce. A connection that breaks one is closed by the guard
// (zmtpParser) before go-zeromq/zmq4 reads the offending header, so zmq4 never allocates
// more than MaxFrameBytes for one frame. One socket then holds at most about
// (MaxConns + 11) × MaxMessageBytes: a message in progress or waiting per connection, and
// zmq4's receive queue of 10 messages (msgio.go newQReader at v0.17.0) plus the one being
// handled.
type WireLimits struct {
	// MaxFrameBytes bounds one frame's body (the payload frame: Limits.MaxPayload).
	MaxFrameBytes int `yaml:"max_frame_bytes" json:"max_frame_bytes"`
	// MaxMessageFrames bounds the frames of one message (vLLM sends 3).
	MaxMessageFrames int `yaml:"max_message_frames" json:"max_message_frames"`
	// MaxMessageBytes bounds the sum of one message's frame bodies.
	MaxMessageBytes int `yaml:"max_message_bytes" json:"max_message_bytes"`
	// MaxConns bounds the connections a bound socket holds at once; a connection past it is
	// closed as soon as it is accepted.
	MaxConns int `yaml:"max_conns" json:"max_conns"`
	// HandshakeTimeout bounds how long a new connection may take to send its greeting and
	// READY command (zmq4 accepts one connection at a time, so a silent one would block
	// every replica after it); 0 waits forever.
	HandshakeTimeout time.Duration `yaml:"handshake_timeout" json:"handshake_timeout"`
	// MaxReplayBytes bounds the payloads one replay request collects before they are
	// applied; a replay past it fails and the replica is marked stale.
	MaxReplayBytes int `yaml:"max_replay_bytes" json:"max_replay_bytes"`
}

// DefaultWireLimits fits DefaultLimits: a frame as large as the largest payload, a message
// of it plus 64 KiB for the topic and sequence frames, 8 frames, 64 replicas dialing one
// bound endpoint (about 600 MiB at most, held only while peers send messages that large),
// 10 s for a handshake, and 64 MiB of replayed payloads.
func DefaultWireLimits() WireLimits {
	return WireLimits{MaxFrameBytes: 8 << 20, MaxMessageFrames: 8, MaxMessageBytes: 8<<20 + 64<<10,
		MaxConns: 64, HandshakeTimeout: 10 * time.Second, MaxReplayBytes: 64 << 20}
}

// Validate reports every field out of range.
func (l WireLimits) Validate() error {
	var errs []error
	for _, f := range []struct {
		name string
		v    int
	}{{"max_frame_bytes", l.MaxFrameBytes}, {"max_message_frames", l.MaxMessageFrames},
		{"max_message_bytes", l.MaxMessageBytes}, {"max_conns", l.MaxConns}, {"max_replay_bytes", l.MaxReplayBytes}} {
		if f.v < 1 {
			errs = append(errs, fmt.Errorf("kvevents: wire limit %s %d: want > 0", f.name, f.v))
		}
	}
	if l.HandshakeTimeout < 0 {
		errs = append(errs, fmt.Errorf("kvevents: wire limit handshake_timeout %v: want >= 0", l.HandshakeTimeout))
	}
	return errors.Join(errs...)
}

// WireReason is why the guard closed a connection.
type WireReason uint8

// The reasons the guard closes a connection.
const (
	WireFrameTooLarge   WireReason = iota // a frame over MaxFrameBytes (or a command over 64 KiB)
	WireTooManyFrames                     // a message of more than MaxMessageFrames
	WireMessageTooLarge                   // a message over MaxMessageBytes
	WireProtocol                          // not ZMTP 3.x with NULL security and a compatible peer, or a late handshake
	WireConnLimit                         // a connection past MaxConns
	numWireReasons
)

var wireReasonNames = [numWireReasons]string{"frame_too_large", "too_many_frames", "message_too_large", "protocol", "conn_limit"}

// String is the reason's metric label value.
func (r WireReason) String() string {
	if r < numWireReasons {
		return wireReasonNames[r]
	}
	return fmt.Sprintf("WireReason(%d)", uint8(r))
}

// WireError is the error a guarded connection returns when it closes itself. It is a
// net.Error that is not a timeout, so zmq4 retires the connection.
type WireError struct {
	Reason WireReason
	Detail string
}

func (e *WireError) Error() string {
	return "kvevents: peer closed: " + e.Reason.String() + ": " + e.Detail
}
func (e *WireError) Timeout() bool   { return false }
func (e *WireError) Temporary() bool { return false }

func wireErr(r WireReason, format string, args ...any) error {
	return &WireError{Reason: r, Detail: fmt.Sprintf(format, args...)}
}

// maxCommandBytes bounds one command frame (READY carries a socket type and an identity of
// at most 255 bytes).
const maxCommandBytes = 64 << 10

// ZMTP 3.x framing (rfc.zeromq.org/spec/23, ZMTP 3.0; 3.1 adds commands, not framing).
const (
	zmtpGreetingLen = 64
	flagMore        = 0x01
	flagLong        = 0x02
	flagCommand     = 0x04
	flagReserved    = 0xF8
)

// zmtpParser follows the bytes a peer sends on one connection: the greeting, the NULL
// mechanism's READY command, then frames. feed returns an error for the first byte that
// breaks ZMTP or a limit; the caller must then not pass that chunk on, so zmq4 never reads a
// header announcing more than the limits, nor a READY command it would fail to parse.
type zmtpParser struct {
	lim WireLimits
	own zmq4.SocketType // our socket type: the peer's READY must be compatible with it

	greet  []byte // greeting bytes so far
	ready  bool   // the peer's READY command has been checked
	hdr    [9]byte
	hdrN   int    // header bytes so far; 0 between frames
	remain uint64 // body bytes left in the current frame
	inBody bool
	cmd    []byte // the READY command's body, collected to be checked

	frames   int    // frames of the current message so far
	msgBytes uint64 // their bodies' bytes
}

func newZMTPParser(lim WireLimits, own zmq4.SocketType) *zmtpParser {
	return &zmtpParser{lim: lim, own: own, greet: make([]byte, 0, zmtpGreetingLen)}
}

// feed checks the next bytes of the stream.
func (p *zmtpParser) feed(b []byte) error {
	for len(b) > 0 {
		var n int
		var err error
		switch {
		case len(p.greet) < zmtpGreetingLen:
			n = min(len(b), zmtpGreetingLen-len(p.greet))
			p.greet = append(p.greet, b[:n]...)
			if len(p.greet) == zmtpGreetingLen {
				err = checkGreeting(p.greet)
			}
		case p.inBody:
			n, err = p.body(b)
		default:
			n, err = p.header(b)
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// checkGreeting accepts ZMTP 3.x with the NULL mechanism (zmq4 speaks no other version,
// and vLLM configures no security).
func checkGreeting(g []byte) error {
	switch {
	case g[0] != 0xFF || g[9] != 0x7F:
		return wireErr(WireProtocol, "not a ZMTP signature")
	case g[10] != 3:
		return wireErr(WireProtocol, "ZMTP version %d.%d, want 3.x", g[10], g[11])
	case string(bytes.TrimRight(g[12:32], "\x00")) != "NULL":
		return wireErr(WireProtocol, "security mechanism %q, want NULL", bytes.TrimRight(g[12:32], "\x00"))
	case g[32] > 1:
		return wireErr(WireProtocol, "as-server byte %d", g[32])
	}
	return nil
}

// header consumes frame header bytes; once whole, it checks the frame against the limits.
func (p *zmtpParser) header(b []byte) (int, error) {
	flags := p.hdr[0]
	if p.hdrN == 0 {
		if flags = b[0]; flags&flagReserved != 0 {
			return 0, wireErr(WireProtocol, "frame flags 0x%02x", flags)
		}
	}
	need := 2
	if flags&flagLong != 0 {
		need = 9
	}
	n := min(len(b), need-p.hdrN)
	copy(p.hdr[p.hdrN:], b[:n])
	p.hdrN += n
	if p.hdrN < need {
		return n, nil
	}
	size := uint64(p.hdr[1])
	if need == 9 {
		size = binary.BigEndian.Uint64(p.hdr[1:9])
	}
	p.hdrN = 0
	if err := p.frameStart(p.hdr[0], size); err != nil {
		return 0, err
	}
	p.remain, p.inBody = size, true
	if size == 0 {
		return n, p.frameEnd()
	}
	return n, nil
}

// frameStart checks a frame whose header announced size bytes.
func (p *zmtpParser) frameStart(flags byte, size uint64) error {
	isCmd := flags&flagCommand != 0
	switch {
	case !p.ready && !isCmd:
		return wireErr(WireProtocol, "a message before the READY command")
	case isCmd && (flags&flagMore != 0 || p.frames > 0):
		return wireErr(WireProtocol, "a command inside a message")
	case isCmd && size > maxCommandBytes:
		return wireErr(WireFrameTooLarge, "command of %d bytes (limit %d)", size, maxCommandBytes)
	case isCmd:
		return nil
	case p.frames+1 > p.lim.MaxMessageFrames:
		return wireErr(WireTooManyFrames, "message of more than %d frames", p.lim.MaxMessageFrames)
	case size > uint64(p.lim.MaxFrameBytes):
		return wireErr(WireFrameTooLarge, "frame of %d bytes (limit %d)", size, p.lim.MaxFrameBytes)
	case p.msgBytes+size > uint64(p.lim.MaxMessageBytes):
		return wireErr(WireMessageTooLarge, "message of more than %d bytes", p.lim.MaxMessageBytes)
	}
	p.frames++
	p.msgBytes += size
	return nil
}

// body consumes frame body bytes; the first command is collected and checked as READY.
func (p *zmtpParser) body(b []byte) (int, error) {
	n := int(min(uint64(len(b)), p.remain))
	if !p.ready {
		p.cmd = append(p.cmd, b[:n]...)
	}
	p.remain -= uint64(n)
	if p.remain > 0 {
		return n, nil
	}
	return n, p.frameEnd()
}

// frameEnd closes the current frame: the READY command is checked, and a frame without
// MORE ends its message.
func (p *zmtpParser) frameEnd() error {
	p.inBody = false
	if !p.ready {
		if err := p.checkReady(p.cmd); err != nil {
			return err
		}
		p.ready, p.cmd = true, nil
		return nil
	}
	if p.hdr[0]&flagMore == 0 {
		p.frames, p.msgBytes = 0, 0
	}
	return nil
}

// checkReady checks a READY command as zmq4 parses it (Cmd.unmarshalZMTP,
// Metadata.UnmarshalZMTP at v0.17.0, which index past a truncated property): the name, then
// properties of a 1-byte name length, the name, a 4-byte value length and the value, one of
// them a Socket-Type that zmq4 knows and that is compatible with ours.
func (p *zmtpParser) checkReady(body []byte) error {
	if len(body) < 6 || body[0] != 5 || string(body[1:6]) != "READY" {
		return wireErr(WireProtocol, "first command is not READY")
	}
	var peer string
	found := false
	for rest := body[6:]; len(rest) > 0; {
		k := int(rest[0])
		if k == 0 || len(rest) < 1+k+4 {
			return wireErr(WireProtocol, "truncated READY property")
		}
		name := string(rest[1 : 1+k])
		v := binary.BigEndian.Uint32(rest[1+k:])
		rest = rest[1+k+4:]
		if uint64(v) > uint64(len(rest)) {
			return wireErr(WireProtocol, "truncated READY property %q", name)
		}
		// zmq4 keys properties by their title-cased name (cases.Title, NoLower): any name
		// that may become Socket-Type must carry a type zmq4 knows, since its
		// SocketType.IsCompatible panics on another (socket_types.go), and one must
		// become it.
		if strings.EqualFold(name, "Socket-Type") {
			if peer = string(rest[:v]); !p.compatible(peer) {
				return wireErr(WireProtocol, "peer socket type %q cannot talk to %s", peer, p.own)
			}
			found = found || asciiTitle(name) == "Socket-Type"
		}
		rest = rest[v:]
	}
	if !found {
		return wireErr(WireProtocol, "READY without a Socket-Type")
	}
	return nil
}

func (p *zmtpParser) compatible(peer string) bool {
	return slices.Contains(knownSocketTypes, zmq4.SocketType(peer)) && zmq4.SocketType(peer).IsCompatible(p.own)
}

// asciiTitle upper-cases the first ASCII letter of each '-'-separated word.
func asciiTitle(s string) string {
	b := []byte(s)
	for i := range b {
		if (i == 0 || b[i-1] == '-') && 'a' <= b[i] && b[i] <= 'z' {
			b[i] -= 'a' - 'A'
		}
	}
	return string(b)
}

// knownSocketTypes are the socket types zmq4 v0.17.0 knows.
var knownSocketTypes = []zmq4.SocketType{zmq4.Pair, zmq4.Pub, zmq4.Sub, zmq4.Req, zmq4.Rep,
	zmq4.Dealer, zmq4.Router, zmq4.Pull, zmq4.Push, zmq4.XPub, zmq4.XSub}
