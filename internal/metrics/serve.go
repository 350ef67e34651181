package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The default addresses: loopback, a fixed port each, so that one daemon
// and one worker on a machine are scraped at known places. A fleet gives
// each worker its own --metrics.
const (
	DaemonAddr = "127.0.0.1:9479"
	WorkerAddr = "127.0.0.1:9480"
)

// Off is the flag value that serves no metrics.
const Off = "off"

// AddrError is a --metrics value that cannot be served.
type AddrError struct {
	Addr, Why, Fix string
}

func (e *AddrError) Error() string {
	return fmt.Sprintf("--metrics %q: %s (%s)", e.Addr, e.Why, e.Fix)
}

// CheckAddr says whether addr may be listened on, and whether it is
// loopback. The host must be written out: an IP address or "localhost". An
// empty host (":9479") would listen on every interface without saying so,
// and a name could resolve to any of them, so both are refused; a
// non-loopback address is served only because the flag named it.
func CheckAddr(addr string) (loopback bool, err error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return false, &AddrError{Addr: addr, Why: "not HOST:PORT", Fix: "write it as " + DaemonAddr + ", or off"}
	}
	if _, err := net.LookupPort("tcp", port); err != nil || port == "" {
		return false, &AddrError{Addr: addr, Why: "the port is not a number", Fix: "write it as " + DaemonAddr}
	}
	switch host {
	case "":
		return false, &AddrError{Addr: addr, Why: "no host: that would listen on every interface", Fix: "write 127.0.0.1:" + port + " for loopback, or 0.0.0.0:" + port + " to mean every interface"}
	case "localhost":
		return true, nil
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false, &AddrError{Addr: addr, Why: "the host is not an IP address", Fix: "give the interface's address (a name could resolve to any interface), e.g. 127.0.0.1:" + port}
	}
	return ip.IsLoopback(), nil
}

// Listen opens the metrics listener at addr. A port that is taken is an
// error naming who holds it (FindPortHolder), with one exception: fallback
// says that addr is the default rather than the user's word, and a default
// port held by another process of this same account (a second worker on
// the machine, a test's private daemon) gives way to a free loopback port,
// which Start logs. A default held by another account, or by a holder that
// cannot be named, is an error like a named port: giving way would leave
// the default port's scrapers reading that account's numbers as this
// process's.
func Listen(addr string, fallback bool) (net.Listener, error) {
	ln, _, err := listen(addr, fallback)
	return ln, err
}

// listen is Listen, also returning the holder of the default port when it
// gave way to another.
func listen(addr string, fallback bool) (net.Listener, *PortHolder, error) {
	loopback, err := CheckAddr(addr)
	if err != nil {
		return nil, nil, err
	}
	if fallback && !loopback {
		return nil, nil, &AddrError{Addr: addr, Why: "a default must be loopback", Fix: "name the address with --metrics"}
	}
	fix := "give a free port with --metrics HOST:PORT, or --metrics off"
	ln, err := net.Listen("tcp", addr)
	if err == nil {
		return ln, nil, nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return nil, nil, &AddrError{Addr: addr, Why: err.Error(), Fix: fix}
	}
	h, found := holderOf(addr)
	if !found {
		// Gone between the two looks, or bound and not listening (which
		// /proc/net/tcp does not list): one more try, then an error.
		if ln, err := net.Listen("tcp", addr); err == nil {
			return ln, nil, nil
		}
		return nil, nil, &AddrError{Addr: addr, Why: "the port is taken, and no listening socket on it shows in /proc/net/tcp or tcp6 to name who holds it (a socket bound and not listening?)", Fix: fix}
	}
	if fallback && h.UID == os.Geteuid() {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, &AddrError{Addr: addr, Why: "the default port is taken by " + h.String() + ", and no free loopback port was given: " + err.Error(), Fix: fix}
		}
		return ln, &h, nil
	}
	why := "the port is taken by " + h.String()
	if fallback {
		why = "the default port is held by another account: " + h.String() + "; serving elsewhere would leave whoever scrapes the default port reading that account's numbers as this process's"
	}
	return nil, nil, &AddrError{Addr: addr, Why: why, Fix: "stop that process, or " + fix}
}

// Handler serves the Set in Prometheus' text and protobuf formats.
func (s *Set) Handler() http.Handler {
	return promhttp.HandlerFor(prometheus.GathererFunc(s.Gather), promhttp.HandlerOpts{})
}

// Handle serves h at pattern (a http.ServeMux pattern) beside /metrics, on
// the same listener, once Serve or Start is called: a worker's /healthz.
func (s *Set) Handle(pattern string, h http.Handler) {
	if s.extra == nil {
		s.extra = map[string]http.Handler{}
	}
	s.extra[pattern] = h
}

// Serve serves /metrics on ln until ctx ends; only GET /metrics answers
// (and what Handle added).
func (s *Set) Serve(ctx context.Context, ln net.Listener, log *slog.Logger) {
	if log == nil {
		log = slog.Default()
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.Handler())
	for pattern, h := range s.extra {
		mux.Handle(pattern, h)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics endpoint stopped", "addr", ln.Addr().String(), "err", err)
		}
	}()
}

// Start is what a command does with its --metrics value: off serves
// nothing (nil, nil); else it listens (see Listen) and serves until ctx
// ends, logging the address it serves on, and warns when that is not
// loopback.
func (s *Set) Start(ctx context.Context, addr string, isDefault bool, log *slog.Logger) (net.Addr, error) {
	if addr == "" || addr == Off {
		return nil, nil
	}
	if log == nil {
		log = slog.Default()
	}
	ln, movedFrom, err := listen(addr, isDefault)
	if err != nil {
		return nil, err
	}
	if movedFrom != nil {
		log.Warn("metrics: the default port is taken by another process of this account; serving on another loopback port, so whoever scrapes the default reads that process's numbers, not these (give this process --metrics 127.0.0.1:PORT to fix it)",
			"default", addr, "addr", ln.Addr().String(), "holder", movedFrom.String())
	}
	if loopback, _ := CheckAddr(addr); !loopback {
		log.Warn("metrics served on a non-loopback address: whoever reaches it can read them", "addr", addr)
	}
	s.Serve(ctx, ln, log)
	log.Info("metrics", "addr", "http://"+ln.Addr().String()+"/metrics")
	return ln.Addr(), nil
}
