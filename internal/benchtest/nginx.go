package benchtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"kvroute/internal/nettest"
)

// nginxConf proxies every path to one backend over keep-alive HTTP/1.1, as an operator would
// put nginx in front of vLLM: no access log, responses passed on as they arrive.
const nginxConf = `daemon off;
master_process %[4]s;
worker_processes %[5]d;
error_log stderr error;
pid %[1]s/nginx.pid;
events { worker_connections 4096; }
http {
	access_log off;
	client_body_temp_path %[1]s/body;
	proxy_temp_path %[1]s/proxy;
	client_body_buffer_size 64k;
	keepalive_requests 1000000;
	upstream backend { server %[2]s; keepalive 256; keepalive_requests 1000000; }
	server {
		listen %[3]s;
		location / {
			proxy_pass http://backend;
			proxy_http_version 1.1;
			proxy_set_header Connection "";
			proxy_buffering off;
		}
	}
}
`

// Nginx starts nginx (from PATH, or $KVROUTE_NGINX) in front of backend: the reference the
// gateway's throughput target is set against, measured in the same run as the gateway.
// Workers come from $KVROUTE_NGINX_WORKERS (default 1). It returns "" when nginx is not
// installed, and the benchmark leaves its row out. It also returns nginx's process id (its
// only process, with one worker).
func Nginx(b *testing.B, backend string) (string, int) {
	bin := os.Getenv("KVROUTE_NGINX")
	if bin == "" {
		var err error
		if bin, err = exec.LookPath("nginx"); err != nil {
			return "", 0
		}
	}
	addr := nettest.FreeAddr(b)
	dir := b.TempDir()
	workers, master := 1, "off"
	if w, _ := strconv.Atoi(os.Getenv("KVROUTE_NGINX_WORKERS")); w > 1 {
		workers, master = w, "on"
	}
	conf := fmt.Sprintf(nginxConf, dir, backend, addr, master, workers)
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", path, "-e", "stderr")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }) // the master stops its workers
	WaitListening(b, "nginx", addr)
	return "http://" + addr, cmd.Process.Pid
}

// WaitListening waits, as nettest.WaitFor does, for a server named name to accept
// connections on addr.
func WaitListening(b *testing.B, name, addr string) {
	b.Helper()
	nettest.WaitFor(b, name+" listening on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	})
}
