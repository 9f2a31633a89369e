package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/bits"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gonetstack/gonet/bridge"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/shm"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stats"
)

// gonet bridge: package bridge as a process of its own, a learning switch
// between TAP devices and stream sockets (issue 13, item 2). Each GoNet
// stack, VM or kernel interface on it is a port.

var bridgeCommand = &command{
	name:    "bridge",
	summary: "switch Ethernet frames between TAP devices and GoNet stacks or VMs on UNIX sockets, as a learning bridge",
	usage: "gonet bridge [-tap NAME]... [-connect PATH]... [-listen PATH] [-ring-listen PATH [-ring-size N]] [-mtu N] [-ageing DURATION] [-table-size N] " +
		"[-queue N] [-control PATH] [-metrics [HOST]:PORT] [-pprof [HOST]:PORT] [-log-level LEVEL] [-log-format text|json]",
	about: `Runs a learning Ethernet bridge (IEEE 802.1D, without the spanning tree)
whose ports are TAP devices and UNIX stream sockets carrying frames each
behind its 32-bit big-endian length, as QEMU's -netdev stream sends them.
It learns which port each station's address is behind from the frames it
sends, forgets it after -ageing without one, and sends each frame only to
its station's port; broadcasts, multicasts and frames for stations not yet
learnt go to every other port. Frames for the reserved addresses
01:80:c2:00:00:00 to 0f (spanning tree, pause, LLDP) go nowhere.

-tap attaches a TAP device, created when absent; its kernel side is yours
to bring up or to put in a bridge or a namespace. -connect attaches the
UNIX socket where gonet up -socket PATH (or QEMU with -netdev stream,
server=on) listens, and connects again whenever that peer goes and comes
back. -listen makes a UNIX socket where any number of peers connect (QEMU
with server=off), each a port of its own while it stays; a file already
at its PATH is an error, not replaced. -ring-listen does the same for
GoNet processes on shared-memory rings: each gonet up -ring PATH that
attaches is a port, its frames crossing without a system call each. A port whose
device or peer fails is removed, and logged; the others go on. A port
slower than the rest drops what its queue (-queue frames) cannot hold,
counted, rather than holding the others up.

When ready it prints "gonet: bridge up PORT...", the TAP devices and the
sockets, on stdout; a -connect peer becomes a port when it answers, before
or after. On SIGINT or SIGTERM it closes every port, prints the
counters and exits 0. With -control PATH it serves its counters there for
gonet stats -control PATH, and its ports and its table of stations as JSON
at ` + bridgeStatusPath + `; with -metrics it serves them to Prometheus at
http://[HOST]:PORT/metrics (gonet_bridge_*, and gonet_port_* with the
port's name as the nic label).`,
	flags: func() *flag.FlagSet { fs, _ := bridgeFlags(); return fs },
	run:   runBridge,
}

// bridgeStatusPath is where the control socket shows the ports and the
// table of stations.
const bridgeStatusPath = services.StatusPrefix + "bridge.json"

// bridgeConfig is gonet bridge's command line, parsed.
type bridgeConfig struct {
	taps       []string
	connects   []string
	listen     string
	ringListen string
	ringSize   int // -ring-size: each ring port's descriptors; 0: shm's default
	mtu        int
	ageing     time.Duration
	tableSize  int
	queue      int
	control    string
	metrics    metricsConfig
	log        logConfig
}

func bridgeFlags() (*flag.FlagSet, *bridgeConfig) {
	c := &bridgeConfig{}
	fs := newFlagSet("bridge")
	fs.Func("tap", "attach the TAP device `NAME` as a port, created when absent (repeatable)", func(s string) error {
		if err := checkTapName(s); err != nil {
			return errors.New(strings.TrimPrefix(err.Error(), fmt.Sprintf("-tap %q ", s)))
		}
		if slices.Contains(c.taps, s) {
			return fmt.Errorf("%s given twice", s)
		}
		c.taps = append(c.taps, s)
		return nil
	})
	fs.Func("connect", "attach the UNIX socket `PATH` where gonet up -socket or a VM listens, connecting again when it comes back (repeatable)", func(s string) error {
		if slices.Contains(c.connects, s) {
			return fmt.Errorf("%s given twice", s)
		}
		c.connects = append(c.connects, s)
		return nil
	})
	fs.StringVar(&c.listen, "listen", "", "listen on the UNIX socket `PATH`; every peer that connects is a port")
	fs.StringVar(&c.ringListen, "ring-listen", "", "listen on the UNIX socket `PATH` for shared-memory rings; every gonet up -ring PATH that attaches is a port")
	fs.IntVar(&c.ringSize, "ring-size", 0, "give each ring port's two directions `N` frame descriptors, a power of two in "+
		strconv.Itoa(shm.MinRingSize)+".."+strconv.Itoa(shm.MaxRingSize)+" (default "+strconv.Itoa(shm.DefaultRingSize)+")")
	fs.IntVar(&c.mtu, "mtu", 1500, "the MTU `N` of every port, "+strconv.Itoa(minMTU)+".."+strconv.Itoa(stream.MaxMTU))
	fs.DurationVar(&c.ageing, "ageing", bridge.DefaultAgeingTime, "forget a station after `DURATION` without a frame from it")
	fs.IntVar(&c.tableSize, "table-size", bridge.DefaultTableSize, "remember at most `N` stations; the one seen longest ago makes room")
	fs.IntVar(&c.queue, "queue", bridge.DefaultQueueLen, "queue at most `N` frames for each port; more are dropped and counted")
	fs.StringVar(&c.control, "control", "", "serve the counters and the station table on the Unix socket `PATH`")
	c.metrics.register(fs)
	c.log.register(fs, slog.LevelInfo)
	return fs, c
}

func parseBridge(args []string) (*bridgeConfig, error) {
	fs, c := bridgeFlags()
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	switch {
	case fs.NArg() > 0:
		return nil, usagef("unexpected argument %q: bridge takes only flags", fs.Arg(0))
	case len(c.taps) == 0 && len(c.connects) == 0 && c.listen == "" && c.ringListen == "":
		return nil, usagef("no ports: give -tap, -connect, -listen or -ring-listen")
	case c.listen != "" && c.listen == c.ringListen:
		return nil, usagef("-listen and -ring-listen are two sockets: give two paths")
	case c.ringSize != 0 && c.ringListen == "":
		return nil, usagef("-ring-size sizes the ring ports of -ring-listen: give that too")
	case c.ringSize != 0 && (c.ringSize < shm.MinRingSize || c.ringSize > shm.MaxRingSize || bits.OnesCount(uint(c.ringSize)) != 1):
		return nil, usagef("-ring-size %d is not a power of two in %d..%d", c.ringSize, shm.MinRingSize, shm.MaxRingSize)
	case c.mtu < minMTU || c.mtu > stream.MaxMTU:
		return nil, usagef("-mtu %d is outside %d..%d", c.mtu, minMTU, stream.MaxMTU)
	case c.ageing <= 0:
		return nil, usagef("-ageing %v: must be positive", c.ageing)
	case c.tableSize < 1:
		return nil, usagef("-table-size %d: must be at least 1", c.tableSize)
	case c.queue < 1:
		return nil, usagef("-queue %d: must be at least 1", c.queue)
	}
	return c, nil
}

func runBridge(ctx context.Context, cmd *command, out *output, args []string) int {
	c, err := parseBridge(args)
	if err != nil {
		return reportParseError(out, cmd, err)
	}
	log := c.log.logger(out.stderr)
	d, err := startBridge(ctx, log, c)
	if err != nil {
		log.Error("starting the bridge", "err", err)
		return exitFail
	}
	fmt.Fprintf(out.stdout, "gonet: bridge up %s\n", strings.Join(d.names, " "))

	code := exitOK
	select {
	case <-ctx.Done():
	case <-d.svc.Failed():
		code = exitFail
	}
	// The sockets first, so that no peer attaches to a closing bridge.
	if err := d.svc.Stop(); err != nil {
		logErrors(log, "shutting down", err)
		code = exitFail
	}
	counters := d.stop()
	if err := stats.Write(out.stdout, counters.Values(), false); err != nil {
		log.Error("writing the counters", "err", err)
		code = exitFail
	}
	return code
}

// bridgeDaemon is a running gonet bridge.
type bridgeDaemon struct {
	c     *bridgeConfig
	log   *slog.Logger
	br    *bridge.Bridge
	svc   *serviceGroup // -listen's and -connect's goroutines, the control socket
	names []string      // the ports of the command line, for the ready line

	// mu guards live and gone: the ports on the bridge now, and the
	// counters of those gone, by name, so that the counters at the end
	// count every port the bridge has had without holding on to any.
	mu   sync.Mutex
	live map[*bridge.Port]struct{}
	gone stats.Snapshot
}

// startBridge opens the ports of c and starts the bridge. On error nothing
// is left running.
func startBridge(ctx context.Context, log *slog.Logger, c *bridgeConfig) (_ *bridgeDaemon, err error) {
	d := &bridgeDaemon{c: c, log: log, svc: newServiceGroup(ctx), live: map[*bridge.Port]struct{}{}, gone: stats.Snapshot{},
		br: bridge.New(bridge.Config{AgeingTime: c.ageing, TableSize: c.tableSize, QueueLen: c.queue, Logger: log})}
	defer func() {
		if err != nil {
			d.svc.Stop()
			d.stop()
		}
	}()
	for _, name := range c.taps {
		// No offloads: frames cross the bridge with complete checksums
		// and within the MTU, whatever the other ports take.
		ep, err := tap.Open(name, tap.Options{MTU: c.mtu})
		if err != nil {
			return nil, err
		}
		if _, err := d.addPort(ep.Name(), ep); err != nil {
			return nil, err
		}
		d.names = append(d.names, ep.Name())
	}
	if c.listen != "" {
		ln, err := net.Listen("unix", c.listen)
		if err != nil {
			return nil, fmt.Errorf("-listen: %w", err)
		}
		d.svc.run(func(ctx context.Context) error { return d.accept(ctx, ln) })
		d.names = append(d.names, c.listen)
	}
	if c.ringListen != "" {
		// No offloads, as on the TAP devices: a frame from a ring may
		// go out on any port.
		ln, err := shm.Listen(c.ringListen, shm.Options{MTU: c.mtu, RingSize: c.ringSize})
		if err != nil {
			return nil, fmt.Errorf("-ring-listen: %w", err)
		}
		d.svc.run(func(ctx context.Context) error { return d.acceptRings(ctx, ln) })
		d.names = append(d.names, c.ringListen)
	}
	for i, path := range c.connects {
		name := "connect" + strconv.Itoa(i)
		d.svc.run(func(ctx context.Context) error { d.keepConnected(ctx, name, path); return nil })
		d.names = append(d.names, path)
	}
	if c.control != "" {
		ln, err := listenControl(c.control)
		if err != nil {
			return nil, err
		}
		h := services.HTTPHandler("", bridgeStatus{d})
		mux := http.NewServeMux()
		mux.Handle("/", h)
		mux.HandleFunc("GET "+bridgeStatusPath, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("Cache-Control", "no-store")
			json.NewEncoder(w).Encode(d.info())
		})
		d.svc.run(func(ctx context.Context) error { return serveControlHandler(ctx, ln, mux) })
	}
	if _, err := c.metrics.start(d.svc, log, d.metrics); err != nil {
		return nil, err
	}
	return d, nil
}

// addPort adds ep to the bridge as port name. It returns the port, nil
// when it has failed already.
func (d *bridgeDaemon) addPort(name string, ep link.Endpoint) (*bridge.Port, error) {
	if err := d.br.AddPort(name, ep); err != nil {
		return nil, err
	}
	p := d.br.Port(name)
	if p == nil {
		return nil, nil
	}
	d.mu.Lock()
	d.live[p] = struct{}{}
	d.mu.Unlock()
	go func() {
		<-p.Done()
		d.retire(p)
	}()
	return p, nil
}

// retire keeps the counters of p, gone from the bridge, and lets go of p.
func (d *bridgeDaemon) retire(p *bridge.Port) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.live[p]; !ok {
		return
	}
	delete(d.live, p)
	stats.WalkSamples("Port."+p.Name(), p.Stats(), func(name string, x stats.Sample) {
		if x.Kind == stats.KindCounter {
			x.Value += d.gone[name].Value
			d.gone[name] = x
		}
	})
}

// streamPort returns a port on conn, a peer's stream connection: it leaves
// the bridge when the peer goes.
func (d *bridgeDaemon) streamPort(conn net.Conn) (*stream.Endpoint, error) {
	return stream.New(conn, stream.Options{MTU: d.c.mtu, EndWithPeer: true})
}

// accept makes a port of every peer that connects to ln, until ctx is
// done.
func (d *bridgeDaemon) accept(ctx context.Context, ln net.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer ln.Close()
	backoff := 5 * time.Millisecond
	for n := 0; ; {
		conn, err := ln.Accept()
		if ctx.Err() != nil {
			if conn != nil {
				conn.Close()
			}
			return nil
		}
		if err != nil {
			// Out of descriptors, say: wait rather than spin, as
			// net/http's server does.
			d.log.Warn("bridge: -listen: accept", "err", err)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		n++
		ep, err := d.streamPort(conn)
		if err == nil {
			_, err = d.addPort("listen"+strconv.Itoa(n), ep)
		}
		if err != nil {
			d.log.Warn("bridge: -listen: a peer not attached", "err", err)
		}
	}
}

// acceptRings makes a port of every GoNet process that attaches a ring to
// ln, until ctx is done.
func (d *bridgeDaemon) acceptRings(ctx context.Context, ln *shm.Listener) error {
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	defer ln.Close()
	for n := 0; ; {
		ep, err := ln.Accept()
		if ctx.Err() != nil {
			if ep != nil {
				ep.Close()
			}
			return nil
		}
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return fmt.Errorf("-ring-listen: %w", err)
			}
			// A peer's failed handshake, counted by the listener, or
			// out of descriptors: wait a little rather than spin.
			d.log.Warn("bridge: -ring-listen: a peer not attached", "err", err)
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		n++
		if _, err := d.addPort("ring"+strconv.Itoa(n), ep); err != nil {
			d.log.Warn("bridge: -ring-listen: a peer not attached", "err", err)
		}
	}
}

// redialDelay bounds the wait between attempts to reach a -connect peer
// that is not there.
const redialDelay = time.Second

// keepConnected attaches the peer listening at path as port name, and
// again each time it has gone, until ctx is done.
func (d *bridgeDaemon) keepConnected(ctx context.Context, name, path string) {
	backoff := 50 * time.Millisecond
	var dialer net.Dialer
	for {
		conn, err := dialer.DialContext(ctx, "unix", path)
		var p *bridge.Port
		if err == nil {
			var ep *stream.Endpoint
			if ep, err = d.streamPort(conn); err == nil {
				p, err = d.addPort(name, ep)
			}
		}
		if err == nil {
			d.log.Info("bridge: connected", "port", name, "socket", path)
			start := time.Now()
			if p != nil {
				select {
				case <-p.Done():
				case <-ctx.Done():
					return
				}
			}
			// A peer that stayed gets its successor at once; one that
			// accepts and goes at once (a listener dying as it is
			// reached) is tried again only after a wait, which grows.
			if time.Since(start) >= redialDelay {
				backoff = 50 * time.Millisecond
				continue
			}
		} else if ctx.Err() != nil {
			return
		} else {
			d.log.Debug("bridge: -connect: no peer yet", "socket", path, "err", err)
		}
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(2*backoff, redialDelay)
	}
}

// stop closes the bridge and returns the counters of the bridge and of
// every port it has had.
func (d *bridgeDaemon) stop() stats.Snapshot {
	d.br.Close()
	return d.metrics()
}

// metrics returns the bridge's counters, Bridge.*, and every port's,
// Port.NAME.*, a port that came back under its name summed over its
// lives.
func (d *bridgeDaemon) metrics() stats.Snapshot {
	snap := stats.Take("Bridge", d.br.Stats())
	d.mu.Lock()
	defer d.mu.Unlock()
	maps.Copy(snap, d.gone)
	for p := range d.live {
		stats.WalkSamples("Port."+p.Name(), p.Stats(), func(name string, x stats.Sample) {
			if x.Kind == stats.KindCounter {
				x.Value += snap[name].Value
			}
			snap[name] = x
		})
	}
	return snap
}

// bridgeStatus shows the bridge on the control socket's status pages.
type bridgeStatus struct{ d *bridgeDaemon }

func (s bridgeStatus) Metrics() stats.Snapshot { return s.d.metrics() }

func (s bridgeStatus) Connections() []services.ConnRow { return []services.ConnRow{} }

// bridgeInfo is what bridgeStatusPath shows: the ports and the stations.
type bridgeInfo struct {
	Ports    []bridgePortInfo `json:"ports"`
	Stations []stationInfo    `json:"stations"`
}

type bridgePortInfo struct {
	Name     string           `json:"name"`
	MAC      string           `json:"mac"`
	MTU      int              `json:"mtu"`
	Counters map[string]int64 `json:"counters"`
}

type stationInfo struct {
	MAC  string  `json:"mac"`
	Port string  `json:"port"`
	Age  float64 `json:"age_s"` // seconds since its last frame
}

func (d *bridgeDaemon) info() bridgeInfo {
	bi := bridgeInfo{Ports: []bridgePortInfo{}, Stations: []stationInfo{}}
	for _, p := range d.br.Ports() {
		bi.Ports = append(bi.Ports, bridgePortInfo{Name: p.Name(), MAC: p.MAC().String(), MTU: p.Endpoint().MTU(),
			Counters: stats.Map("", p.Stats())})
	}
	for _, s := range d.br.Table() {
		bi.Stations = append(bi.Stations, stationInfo{MAC: s.MAC.String(), Port: s.Port, Age: s.Age.Seconds()})
	}
	return bi
}
