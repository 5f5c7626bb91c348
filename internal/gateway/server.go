package gateway

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// ServerConfig configures a Server. Durations decode from strings such as "30s" in YAML.
type ServerConfig struct {
	// ReadHeaderTimeout bounds reading a request's head, from the first byte of the request
	// (or from the connection's start for the first request) to the blank line (30s).
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" json:"read_header_timeout"`
	// IdleTimeout bounds the wait for the next request on a kept-alive connection (120s).
	IdleTimeout time.Duration `yaml:"idle_timeout" json:"idle_timeout"`
	// MaxHeaderBytes bounds a request's head, request line included (64 KiB); a larger head,
	// or a line longer than 8 KiB, is answered 431.
	MaxHeaderBytes int `yaml:"max_header_bytes" json:"max_header_bytes"`
}

// DefaultServerConfig returns the defaults documented on each field.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{ReadHeaderTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10}
}

// Validate checks every field and returns all problems joined, each naming its field.
func (c ServerConfig) Validate() error {
	var errs []error
	positive(&errs, "read_header_timeout", c.ReadHeaderTimeout)
	positive(&errs, "idle_timeout", c.IdleTimeout)
	if c.MaxHeaderBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("max_header_bytes %d: want >= 1024", c.MaxHeaderBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gateway: server config: %w", err)
	}
	return nil
}

// Server serves an http.Handler (a Gateway) over HTTP/1.1 with less work per request than
// net/http's server, which matters because a proxy pays for a server and a client on every
// request: each connection's goroutine reads a request, calls the handler and writes the
// response itself, usually in one write; a client's going away is watched for only once a
// request has run for a while (see watchDelay); the request, response and buffers are reused
// along a connection. It supports keep-alive, Content-Length and chunked request bodies,
// Expect: 100-continue, chunked responses and http.Flusher; not TLS, HTTP/2, trailers,
// informational responses or hijacking.
//
// The handler gets an *http.Request that the server reuses for the connection's next
// request, so it must not keep it, or its Header, once it returns; its context ends when
// the client closes the connection.
type Server struct {
	cfg     ServerConfig
	handler http.Handler
	onError func(error)

	closing atomic.Bool
	idle    chan struct{} // receives when a connection closes during a shutdown

	mu        sync.Mutex // guards the maps, and closing's change
	listeners map[net.Listener]struct{}
	conns     map[*serverConn]struct{}
}

// NewServer returns a server for h. onError, when not nil, is told of handler panics other
// than http.ErrAbortHandler and of failures to accept connections; it must not block.
func NewServer(cfg ServerConfig, h http.Handler, onError func(error)) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Server{cfg: cfg, handler: h, onError: onError, listeners: map[net.Listener]struct{}{},
		conns: map[*serverConn]struct{}{}, idle: make(chan struct{}, 1)}, nil
}

// Serve accepts connections on ln and serves each on its own goroutine until Shutdown or
// Close, when it returns http.ErrServerClosed; it returns other errors from ln at once,
// except temporary ones, after which it retries with a growing pause.
func (s *Server) Serve(ln net.Listener) error {
	if !s.track(ln, true) {
		return http.ErrServerClosed
	}
	defer s.track(ln, false)
	var pause time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if s.shuttingDown() {
				return http.ErrServerClosed
			}
			if ne, ok := err.(interface{ Temporary() bool }); !ok || !ne.Temporary() {
				return err
			}
			pause = min(max(2*pause, 5*time.Millisecond), time.Second)
			s.report(fmt.Errorf("gateway: server: accept: %w; retrying in %v", err, pause))
			time.Sleep(pause)
			continue
		}
		pause = 0
		c := newServerConn(s, nc)
		if !s.add(c) {
			_ = nc.Close()
			return http.ErrServerClosed
		}
		go c.serve()
	}
}

// Shutdown stops accepting connections, closes the idle ones and waits for the others to
// finish the request they serve, each closing after its response. When ctx ends first it
// returns ctx's error and leaves the remaining connections to Close.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.beginClose()
	for c := range s.conns {
		if !c.active.Load() {
			_ = c.nc.Close()
		}
	}
	s.mu.Unlock()
	for {
		s.mu.Lock()
		n := len(s.conns)
		s.mu.Unlock()
		if n == 0 {
			return nil
		}
		select {
		case <-s.idle:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops accepting connections and closes every connection at once.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.beginClose()
	for c := range s.conns {
		_ = c.nc.Close()
	}
	return nil
}

// beginClose marks the server closing and closes its listeners. s.mu must be held.
func (s *Server) beginClose() {
	s.closing.Store(true)
	for ln := range s.listeners {
		_ = ln.Close()
	}
	clear(s.listeners)
}

func (s *Server) shuttingDown() bool { return s.closing.Load() }

func (s *Server) track(ln net.Listener, add bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !add {
		delete(s.listeners, ln)
		return true
	}
	if s.closing.Load() {
		return false
	}
	s.listeners[ln] = struct{}{}
	return true
}

func (s *Server) add(c *serverConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closing.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

// setActive marks c as serving a request or idle. It reports false when the server is
// closing: the connection must then close. Shutdown closes only idle connections, and a
// connection checks closing after it changes state, so none is left open and idle.
func (s *Server) setActive(c *serverConn, active bool) bool {
	c.active.Store(active)
	return !s.closing.Load()
}

// forget drops a closed connection.
func (s *Server) forget(c *serverConn) {
	s.mu.Lock()
	delete(s.conns, c)
	closing := s.closing.Load()
	s.mu.Unlock()
	if closing {
		select {
		case s.idle <- struct{}{}:
		default:
		}
	}
}

func (s *Server) report(err error) {
	if s.onError != nil {
		s.onError(err)
	}
}
