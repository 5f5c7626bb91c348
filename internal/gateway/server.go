package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"strconv"
	"time"
)

// ServerConfig bounds what a client of the Server may send, hold and take. Durations decode
// from strings such as "30s" in YAML.
type ServerConfig struct {
	// ReadHeaderTimeout bounds reading a request's head, from its first byte (or the
	// connection's start) to the blank line (30s).
	ReadHeaderTimeout time.Duration `yaml:"read_header_timeout" json:"read_header_timeout"`
	// ReadBodyTimeout bounds reading a request's body once its head is read (60s); a body
	// that takes longer gets 408 and the connection is closed.
	ReadBodyTimeout time.Duration `yaml:"read_body_timeout" json:"read_body_timeout"`
	// WriteTimeout bounds each write of a response to the client (60s): a client that stops
	// reading a stream for that long is disconnected, its backend request cancelled.
	WriteTimeout time.Duration `yaml:"write_timeout" json:"write_timeout"`
	// IdleTimeout bounds the wait for the next request on a kept-alive connection (120s).
	IdleTimeout time.Duration `yaml:"idle_timeout" json:"idle_timeout"`
	// MaxHeaderBytes bounds a request's head (64 KiB); a larger one gets 431.
	MaxHeaderBytes int `yaml:"max_header_bytes" json:"max_header_bytes"`
	// MaxConnections caps the client connections open at once (10,000); a connection over the
	// cap is answered 503 and closed at once. Keep it under the file-descriptor limit, about
	// half of it: a connection with a request in flight holds a backend connection too.
	MaxConnections int `yaml:"max_connections" json:"max_connections"`
	// MaxConnectionsPerClient caps the connections one client IP address holds open at once
	// (1,000); one over it is answered 503 and closed at once. Behind a proxy or load
	// balancer that every client comes through, raise it to MaxConnections.
	MaxConnectionsPerClient int `yaml:"max_connections_per_client" json:"max_connections_per_client"`
}

// DefaultServerConfig returns the defaults documented on each field.
func DefaultServerConfig() ServerConfig {
	return ServerConfig{ReadHeaderTimeout: 30 * time.Second, ReadBodyTimeout: 60 * time.Second, WriteTimeout: 60 * time.Second,
		IdleTimeout: 120 * time.Second, MaxHeaderBytes: 64 << 10, MaxConnections: 10000, MaxConnectionsPerClient: 1000}
}

// Validate checks every field and returns all problems joined, each naming its field.
func (c ServerConfig) Validate() error {
	var errs []error
	positive(&errs, "read_header_timeout", c.ReadHeaderTimeout)
	positive(&errs, "read_body_timeout", c.ReadBodyTimeout)
	positive(&errs, "write_timeout", c.WriteTimeout)
	positive(&errs, "idle_timeout", c.IdleTimeout)
	if c.MaxHeaderBytes < 1<<10 {
		errs = append(errs, fmt.Errorf("max_header_bytes %d: want >= 1024", c.MaxHeaderBytes))
	}
	if c.MaxConnections < 1 {
		errs = append(errs, fmt.Errorf("max_connections %d: want >= 1", c.MaxConnections))
	}
	if c.MaxConnectionsPerClient < 1 {
		errs = append(errs, fmt.Errorf("max_connections_per_client %d: want >= 1", c.MaxConnectionsPerClient))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("gateway: server config: %w", err)
	}
	return nil
}

// Server is net/http's server with the limits of a ServerConfig: the head, body, write and
// idle timeouts, a header size limit, and caps on open connections, in all and per client.
// At the cap, a new connection takes the place of an idle one (kept alive between requests)
// of the client holding the most connections, so that idle keep-alives cannot lock other
// clients out; a connection that has sent nothing yet is bounded by ReadHeaderTimeout. It serves any
// handler; cmd/route serves a Gateway with it.
type Server struct {
	srv   *http.Server
	cfg   ServerConfig
	conns *connTable
	// rejecting bounds the connections over the cap being answered at once.
	rejecting chan struct{}
}

// NewServer returns a Server for h; errorLog, when not nil, receives net/http's reports
// (handler panics, accept errors).
func NewServer(cfg ServerConfig, h http.Handler, errorLog *log.Logger) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, rejecting: make(chan struct{}, 256), conns: newConnTable(cfg.MaxConnections, cfg.MaxConnectionsPerClient)}
	s.srv = &http.Server{Handler: s.limits(h), ReadHeaderTimeout: cfg.ReadHeaderTimeout, IdleTimeout: cfg.IdleTimeout,
		MaxHeaderBytes: cfg.MaxHeaderBytes, ErrorLog: errorLog, ConnState: s.conns.track}
	return s, nil
}

// Serve serves ln until Shutdown or Close, when it returns http.ErrServerClosed.
func (s *Server) Serve(ln net.Listener) error {
	return s.srv.Serve(&capListener{Listener: ln, s: s})
}

// Shutdown closes the listeners and the idle connections, then waits for the active ones to
// finish their request, until ctx ends.
func (s *Server) Shutdown(ctx context.Context) error { return s.srv.Shutdown(ctx) }

// Close closes the listeners and every connection at once.
func (s *Server) Close() error { return s.srv.Close() }

// limits applies the body-read and write timeouts to each request, and closes the
// connection after a request framed by Transfer-Encoding. net/http frames a request that
// carries both Transfer-Encoding and Content-Length by the former and removes the latter
// (RFC 9112 §6.3), so the handler cannot tell the two apart; the RFC requires closing the
// connection after answering such a request, since a proxy in front may have framed it by
// Content-Length and sent what follows as another request.
func (s *Server) limits(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TransferEncoding) > 0 {
			w.Header().Set("Connection", "close")
		}
		rc := http.NewResponseController(w)
		if r.Body != nil && r.Body != http.NoBody {
			_ = rc.SetReadDeadline(time.Now().Add(s.cfg.ReadBodyTimeout))
			r.Body = &deadlineBody{ReadCloser: r.Body, rc: rc}
		}
		h.ServeHTTP(&deadlineWriter{ResponseWriter: w, rc: rc, d: s.cfg.WriteTimeout}, r)
	})
}

// deadlineBody lifts the body's read deadline once the whole body has been read, so that
// net/http can watch the connection for the client's going away while the response is
// produced. A body that failed keeps its deadline: what net/http reads of the connection
// after it fails at once.
type deadlineBody struct {
	io.ReadCloser
	rc   *http.ResponseController
	done bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF && !b.done {
		b.done = true
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// deadlineWriter gives each write of the response WriteTimeout to complete.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
}

func (w *deadlineWriter) arm() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

func (w *deadlineWriter) Write(p []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(p)
}

// Flush implements http.Flusher.
func (w *deadlineWriter) Flush() {
	w.arm()
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// capListener hands the server the connections its connTable admits; the others are
// answered with a 503 and closed, so a flood of connections costs the server neither file
// descriptors nor goroutines for long.
type capListener struct {
	net.Listener
	s *Server
}

func (l *capListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		sc, shed, refusal := l.s.conns.admit(c)
		if shed != nil {
			_ = shed.Close()
		}
		if sc != nil {
			return sc, nil
		}
		l.s.reject(c, refusal)
	}
}

// What a connection over the cap, or over its client's cap, gets.
var (
	busyResponse       = refusal("too many connections to the router; retry later")
	clientBusyResponse = refusal("too many connections from this client; reuse them or retry later")
)

func refusal(msg string) string {
	body := `{"error":{"message":"` + msg + `","type":"server_error","param":null,"code":"too_many_connections"}}`
	return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\nRetry-After: 1\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// reject answers c with response and closes it. The answer is written, then what the
// client sent is drained briefly, so that closing does not reset the connection before the
// client reads the answer; connections beyond the few being answered are closed at once.
func (s *Server) reject(c net.Conn, response string) {
	select {
	case s.rejecting <- struct{}{}:
	default:
		_ = c.Close()
		return
	}
	go func() {
		defer func() { <-s.rejecting }()
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(time.Second))
		if _, err := io.WriteString(c, response); err != nil {
			return
		}
		if tc, ok := c.(interface{ CloseWrite() error }); ok {
			_ = tc.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(c, 64<<10))
	}()
}
