package kvevents

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"kvroute/internal/nettest"
)

// Hostile peers on the event socket: each test sends what an attacker who reaches the port
// (bind mode) or poses as a publisher (connect mode) can send, then checks that the
// subscriber is still up and applies a well-behaved replica's events.

// replicaSurvives dials addr with a well-behaved publisher of pod1 and waits for its
// events to reach x: the subscriber outlived what came before.
func replicaSurvives(t *testing.T, x *Index, addr string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var pub *Publisher
	nettest.WaitFor(t, "a replica's connection", func() bool { // refused while the router is at MaxConns
		var err error
		pub, err = NewPublisher(ctx, PublisherConfig{Endpoint: "tcp://" + addr, Topic: Topic("pod1", "m")})
		return err == nil
	})
	defer pub.Close()
	before := x.Stats().Cleared
	nettest.WaitFor(t, "a replica's events after the attack", func() bool {
		_ = pub.Publish(payload(Event{Kind: AllBlocksCleared}))
		return x.Stats().Cleared > before
	})
}

// longHeader is a frame header with the LONG flag claiming n bytes.
func longHeader(flags byte, n uint64) []byte {
	return binary.BigEndian.AppendUint64([]byte{flags | 0x02}, n)
}

// small are wire limits a test can break cheaply; a replica's clearing message fits them.
func small() WireLimits {
	return WireLimits{MaxFrameBytes: 1024, MaxMessageFrames: 4, MaxMessageBytes: 2048, MaxConns: 4,
		HandshakeTimeout: 10 * time.Second, MaxReplayBytes: 64 << 10}
}

// Each peer breaks ZMTP or a limit; the router closes its connection before zmq4 reads what
// broke it, counts why, and keeps applying a well-behaved replica's events.
func TestHostilePeerBind(t *testing.T) {
	truncatedReady := append([]byte{5}, "READY"...)
	truncatedReady = append(truncatedReady, 11)
	truncatedReady = append(truncatedReady, "Socket-Type"...) // no value length follows
	plain := zmtpGreeting()
	copy(plain[12:32], "PLAIN")
	kb := make([]byte, 1000)
	for _, tc := range []struct {
		name string
		lim  WireLimits
		send []byte
		want func(Stats) uint64
	}{
		{"frame header claiming 2^62 bytes", WireLimits{}, append(zmtpHello("PUB"), longHeader(0, 1<<62)...),
			func(s Stats) uint64 { return s.ClosedFrameTooLarge }},
		{"frame header claiming 2^62 bytes after a MORE frame", WireLimits{},
			append(append(zmtpHello("PUB"), zmtpFrame(1, []byte("kv@pod1@m"))...), longHeader(1, 1<<62)...),
			func(s Stats) uint64 { return s.ClosedFrameTooLarge }},
		{"READY with a truncated property", WireLimits{}, append(zmtpGreeting(), zmtpFrame(0x04, truncatedReady)...),
			func(s Stats) uint64 { return s.ClosedProtocol }},
		{"READY claiming 2^62 bytes", WireLimits{}, append(zmtpGreeting(), longHeader(0x04, 1<<62)...),
			func(s Stats) uint64 { return s.ClosedFrameTooLarge }},
		{"a message before READY", WireLimits{}, append(zmtpGreeting(), zmtpFrame(0, []byte("x"))...),
			func(s Stats) uint64 { return s.ClosedProtocol }},
		{"PLAIN security", WireLimits{}, append(plain, zmtpReady("PUB")...),
			func(s Stats) uint64 { return s.ClosedProtocol }},
		{"a REQ peer", WireLimits{}, zmtpHello("REQ"), func(s Stats) uint64 { return s.ClosedProtocol }},
		{"a socket type zmq4 does not know", WireLimits{}, zmtpHello("FOO"), func(s Stats) uint64 { return s.ClosedProtocol }},
		{"reserved flag bits", WireLimits{}, append(zmtpHello("PUB"), 0x80, 0),
			func(s Stats) uint64 { return s.ClosedProtocol }},
		{"frames each under the frame limit, over the message limit", small(),
			append(zmtpHello("PUB"), zmtpMessage(kb, kb, kb)...), func(s Stats) uint64 { return s.ClosedMessageTooLarge }},
		{"too many frames", small(), append(zmtpHello("PUB"), zmtpMessage(nil, nil, nil, nil, nil)...),
			func(s Stats) uint64 { return s.ClosedTooManyFrames }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, addr := bindSub(t, tc.lim)
			dialRaw(t, addr, tc.send)
			replicaSurvives(t, x, addr)
			nettest.WaitFor(t, "the closed connection counted", func() bool { return tc.want(x.Stats()) == 1 })
		})
	}
}

// A peer that connects and says nothing is closed after HandshakeTimeout: zmq4 accepts one
// connection at a time, and would otherwise never accept the replicas after it.
func TestSilentPeerBind(t *testing.T) {
	lim := small()
	lim.HandshakeTimeout = 2 * time.Second
	x, addr := bindSub(t, lim)
	dialRaw(t, addr, nil)
	replicaSurvives(t, x, addr)
	if got := x.Stats().ClosedProtocol; got != 1 {
		t.Errorf("ClosedProtocol = %d, want 1 (the silent peer)", got)
	}
}

// A bound socket holds at most MaxConns connections; one past it is closed at once, and a
// freed place takes a new one.
func TestConnLimitBind(t *testing.T) {
	lim := small()
	lim.MaxConns = 2
	x, addr := bindSub(t, lim)
	idle := []net.Conn{dialRaw(t, addr, zmtpHello("PUB")), dialRaw(t, addr, zmtpHello("PUB"))}
	extra := dialRaw(t, addr, zmtpHello("PUB"))
	nettest.WaitFor(t, "the third connection refused", func() bool { return x.Stats().ClosedConnLimit == 1 })
	if _, err := extra.Read(make([]byte, 1)); err == nil {
		t.Error("the connection past MaxConns is open")
	}
	for _, c := range idle {
		c.Close()
	}
	replicaSurvives(t, x, addr)
}

// fakePeer accepts connections on a free port and hands the i-th (from 0) to serve after
// sending the greeting and READY of a sockType socket.
func fakePeer(t *testing.T, sockType string, serve func(i int, c net.Conn)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if _, err := c.Write(zmtpHello(sockType)); err == nil {
					serve(i, c)
				}
			}()
		}
	}()
	return l.Addr().String()
}

// publishCleared writes [topic, seq, AllBlocksCleared] messages on c until it fails or
// stop is closed.
func publishCleared(c net.Conn, topic string, stop <-chan struct{}) {
	for seq := uint64(0); ; seq++ {
		select {
		case <-stop:
			return
		default:
		}
		msg := zmtpMessage([]byte(topic), binary.BigEndian.AppendUint64(nil, seq), payload(Event{Kind: AllBlocksCleared}))
		if _, err := c.Write(msg); err != nil {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// A publisher the router dials sends a frame header claiming 2^62 bytes on its first
// connection: the router drops that connection, redials, and applies the next one's events.
func TestHostilePublisherConnect(t *testing.T) {
	stop := make(chan struct{})
	addr := fakePeer(t, "PUB", func(i int, c net.Conn) {
		if i == 0 {
			_, _ = c.Write(longHeader(0, 1<<62))
			<-stop
			return
		}
		publishCleared(c, Topic("r0", "m"), stop)
	})
	defer close(stop)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	x := NewIndex(DefaultIndexConfig(), DefaultLimits(), newRecorder())
	sub := &Subscriber{Index: x, RetryInterval: 10 * time.Millisecond}
	go func() { _ = sub.Run(ctx, Source{Endpoint: "tcp://" + addr, ID: "r0"}) }()
	nettest.WaitFor(t, "events from the second connection", func() bool { return x.Stats().Cleared > 0 })
	if got := x.Stats().ClosedFrameTooLarge; got != 1 {
		t.Errorf("ClosedFrameTooLarge = %d, want 1", got)
	}
}

// heapInUse is the live heap after a collection.
func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// A peer that sends frame after frame with the MORE flag, never ending its message, does
// not make the router keep them: the heap in use does not grow with what it sends.
func TestMoreFramePileBind(t *testing.T) {
	x, addr := bindSub(t, WireLimits{})
	before := heapInUse()
	c := dialRaw(t, addr, zmtpHello("PUB"))
	chunk := []byte(strings.Repeat(string(zmtpFrame(1, make([]byte, 255))), 1024)) // 257 KiB
	const total = 96 << 20
	for sent := 0; sent < total; sent += len(chunk) {
		if _, err := c.Write(chunk); err != nil {
			break // the router closed the connection
		}
	}
	if grew := int64(heapInUse()) - int64(before); grew > 32<<20 {
		t.Errorf("heap in use grew by %d MiB while a peer sent 96 MiB of MORE frames", grew>>20)
	}
	replicaSurvives(t, x, addr)
	if got := x.Stats().ClosedTooManyFrames; got != 1 {
		t.Errorf("ClosedTooManyFrames = %d, want 1", got)
	}
}

// A replay endpoint can hand back no more than a bounded gap and MaxReplayBytes of
// payloads, and cannot crash the router with a frame header either.
func TestHostileReplay(t *testing.T) {
	big := make([]byte, 16<<10)
	flood := func(_ int, c net.Conn) { // [empty, seq, 16 KiB] for every seq, never the end marker
		for seq := uint64(0); ; seq++ {
			if _, err := c.Write(zmtpMessage(nil, binary.BigEndian.AppendUint64(nil, seq), big)); err != nil {
				return
			}
		}
	}
	huge := func(_ int, c net.Conn) { _, _ = c.Write(longHeader(0, 1<<62)); _, _ = io.Copy(io.Discard, c) }
	for _, tc := range []struct {
		name  string
		serve func(int, net.Conn)
		gap   Gap
		want  string
	}{
		{"payloads past MaxReplayBytes", flood, Gap{0, 100}, "replay of more than 65536 bytes"},
		{"a gap larger than a replay buffer", flood, Gap{0, 1 << 62}, "more than a replay buffer holds"},
		{"frame header claiming 2^62 bytes", huge, Gap{0, 2}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := fakePeer(t, "ROUTER", tc.serve)
			x := NewIndex(DefaultIndexConfig(), DefaultLimits(), newRecorder())
			lim := DefaultWireLimits()
			lim.MaxReplayBytes = 64 << 10
			s := &Subscriber{Index: x, Wire: lim, ReplayTimeout: 5 * time.Second}
			_, err := s.replay(context.Background(), "tcp://"+addr, tc.gap)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			if tc.want == "" && x.Stats().ClosedFrameTooLarge != 1 {
				t.Errorf("ClosedFrameTooLarge = %d, want 1 (err %v)", x.Stats().ClosedFrameTooLarge, err)
			}
		})
	}
}
