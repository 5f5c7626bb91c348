//go:build linux

package gateway

import (
	"errors"
	"net"
	"runtime"
	"sync"
	"syscall"
	"testing"
)

// epollRelay serves a byte relay to backend like tcpRelay, but from one OS thread driving
// epoll over every connection, as nginx's workers do: no goroutine per connection, no
// wake-ups per read. It measures how much of tcp-relay's loss is the goroutine-per-connection
// design rather than the socket calls themselves.
func epollRelay(b *testing.B, backend string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	epfd, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		b.Fatal(err)
	}
	var mu sync.Mutex
	peer := map[int]int{}
	b.Cleanup(func() { _ = ln.Close(); _ = syscall.Close(epfd) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", backend)
			if err != nil {
				_ = c.Close()
				continue
			}
			cfd, cerr := rawFD(c)
			ufd, uerr := rawFD(u)
			if err := errors.Join(cerr, uerr); err != nil {
				b.Error(err) // not Fatal: this is not the benchmark's goroutine
				return
			}
			mu.Lock()
			peer[cfd], peer[ufd] = ufd, cfd
			mu.Unlock()
			for _, fd := range []int{cfd, ufd} {
				ev := syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}
				if err := syscall.EpollCtl(epfd, syscall.EPOLL_CTL_ADD, fd, &ev); err != nil {
					b.Error(err)
				}
			}
		}
	}()
	go func() {
		runtime.LockOSThread()
		events := make([]syscall.EpollEvent, 128)
		buf := make([]byte, 64<<10)
		for {
			n, err := syscall.EpollWait(epfd, events, -1)
			if errors.Is(err, syscall.EINTR) {
				continue
			}
			if err != nil {
				return
			}
			for _, ev := range events[:n] {
				fd := int(ev.Fd)
				mu.Lock()
				to := peer[fd]
				mu.Unlock()
				r, err := syscall.Read(fd, buf)
				if errors.Is(err, syscall.EAGAIN) {
					continue
				}
				if r <= 0 {
					_ = syscall.Close(fd)
					_ = syscall.Close(to)
					continue
				}
				for p := buf[:r]; len(p) > 0; { // spins on EAGAIN: replies here are a few hundred bytes
					w, err := syscall.Write(to, p)
					if err != nil && !errors.Is(err, syscall.EAGAIN) {
						break
					}
					p = p[max(w, 0):]
				}
			}
		}
	}()
	return "http://" + ln.Addr().String()
}

// rawFD takes a duplicate of c's descriptor out of Go's poller and closes c. The duplicate
// shares the socket's O_NONBLOCK, which Go sets on every socket.
func rawFD(c net.Conn) (int, error) {
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		return -1, err
	}
	fd, derr := -1, error(nil)
	if err := rc.Control(func(s uintptr) { fd, derr = syscall.Dup(int(s)) }); err != nil {
		return -1, err
	}
	_ = c.Close()
	return fd, derr
}
