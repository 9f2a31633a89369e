package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strconv"

	"github.com/gonetstack/gonet/internal/rtnl"
	"github.com/gonetstack/gonet/metrics"
	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stats"
)

// The Prometheus endpoint. The status page's /metrics is served over
// GoNet's own TCP, inside the guest's network, and on the control socket,
// a Unix socket Prometheus cannot scrape: -metrics serves /metrics alone on
// a TCP socket of the host's own stack, where a Prometheus on the host (or,
// given an address, on the network) reaches it.

// defaultMetricsHost is where -metrics listens when its HOST is left out:
// the loopback, for the counters tell who talks to whom and how much, and a
// daemon should not publish that to the network unless asked.
const defaultMetricsHost = "127.0.0.1"

// metricsConfig is -metrics and -pprof, parsed: the host addresses to
// serve /metrics and Go's profiles on, empty for none.
type metricsConfig struct {
	httpAddr          // -metrics
	pprof    httpAddr // -pprof
}

// httpAddr is a flag's [HOST]:PORT to serve HTTP on, empty for none.
type httpAddr struct{ addr string }

func (m *metricsConfig) register(fs *flag.FlagSet) {
	fs.Func("metrics", "serve Prometheus metrics at http://`[HOST]:PORT`/metrics on the host's own network (HOST: "+defaultMetricsHost+" when left out)",
		m.set)
	fs.Func("pprof", "serve Go's runtime profiles at http://`[HOST]:PORT`/debug/pprof/ on the host's own network, for go tool pprof (HOST: "+defaultMetricsHost+" when left out)",
		m.pprof.set)
}

// set parses [HOST]:PORT; an empty HOST is the loopback, not every
// address as in Go's net.Listen.
func (a *httpAddr) set(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return errors.New("not [HOST]:PORT, as in :9464 or 0.0.0.0:9464")
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("port %q is not a number 0..65535", port)
	}
	if host == "" {
		host = defaultMetricsHost
	}
	a.addr = net.JoinHostPort(host, port)
	return nil
}

// start listens on -metrics's address and serves src's metrics at /metrics
// there in g, and on -pprof's Go's profiles (net/http/pprof's handlers,
// on a mux of their own rather than http.DefaultServeMux), saying where
// on stderr; it returns the metrics' address bound (nil without
// -metrics).
func (m *metricsConfig) start(g *serviceGroup, log *slog.Logger, src func() stats.Snapshot) (net.Addr, error) {
	if m.pprof.addr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		addr, err := m.pprof.serve(g, "-pprof", mux)
		if err != nil {
			return nil, err
		}
		log.Info("serving Go's profiles", "url", "http://"+addr.String()+"/debug/pprof/")
	}
	if m.addr == "" {
		return nil, nil
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", metrics.Handler(src))
	addr, err := m.serve(g, "-metrics", mux)
	if err != nil {
		return nil, err
	}
	log.Info("serving Prometheus metrics", "url", "http://"+addr.String()+"/metrics")
	return addr, nil
}

// serve listens on a's address and serves h there in g, its errors
// named by flag; it returns the address bound.
func (a *httpAddr) serve(g *serviceGroup, flag string, h http.Handler) (net.Addr, error) {
	ln, err := net.Listen("tcp", a.addr)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	g.run(func(ctx context.Context) error {
		defer ln.Close()
		if err := services.ServeHTTP(ctx, ln, h); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
		return nil
	})
	return ln.Addr(), nil
}

// kernelCounters reads the kernel's own counters of a TAP device: what the
// kernel handed GoNet and what it dropped for it (TxDropped: GoNet did not
// read fast enough and the device's queue overflowed), which no counter of
// GoNet's can see. Its netlink socket was opened in the device's network
// namespace (the guest's, for gonet gateway -netns), and reads it from
// there.
type kernelCounters struct {
	conn *rtnl.Conn
	dev  string // the device's name in its namespace
}

// addTo adds the device's counters to snap as TAP.<nic>.<Name>. A device
// that cannot be read (gone at shutdown) adds nothing: a scrape without
// them beats a failed one. A nil k adds nothing.
func (k *kernelCounters) addTo(snap stats.Snapshot, nic string) {
	if k == nil {
		return
	}
	st, err := k.conn.LinkStats(k.dev)
	if err != nil {
		return
	}
	for _, v := range []struct {
		name string
		v    uint64
	}{
		{"RxPackets", st.RxPackets}, {"TxPackets", st.TxPackets},
		{"RxBytes", st.RxBytes}, {"TxBytes", st.TxBytes},
		{"RxErrors", st.RxErrors}, {"TxErrors", st.TxErrors},
		{"RxDropped", st.RxDropped}, {"TxDropped", st.TxDropped},
	} {
		snap["TAP."+nic+"."+v.name] = stats.Sample{Kind: stats.KindCounter, Value: int64(v.v)}
	}
}

// Close closes the netlink socket; a nil k has none.
func (k *kernelCounters) Close() error {
	if k == nil {
		return nil
	}
	return k.conn.Close()
}
