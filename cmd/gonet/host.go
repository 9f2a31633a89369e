package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/gonetstack/gonet/dhcp"
	"github.com/gonetstack/gonet/internal/rtnl"
	"github.com/gonetstack/gonet/iperf3"
	"github.com/gonetstack/gonet/ipv4ll"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/fault"
	"github.com/gonetstack/gonet/link/pcap"
	"github.com/gonetstack/gonet/link/shm"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/ndp"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/tcp"
)

// host is a GoNet stack up on a TAP device or a stream socket.
type host struct {
	stack *stack.Stack
	nic   string           // the NIC's name in the stack: the TAP device's, or socketNIC
	mac   net.HardwareAddr // GoNet's address on the link
	name  string           // -hostname; empty: hostname's default
	// addrs are the addresses the ready line shows: -addr's, or
	// without any the link-local address.
	addrs []netip.Prefix
	// capture is the -pcap endpoint; nil without -pcap.
	capture *pcap.Endpoint
	// kernel reads the kernel's counters of the TAP device; nil on a
	// VM's socket, which the kernel does not count.
	kernel *kernelCounters
	// ring is the shared-memory link, whose counters are under
	// "Ring.<nic>."; nil on other links.
	ring *shm.Endpoint
	// dhcp is -addr dhcp's client, nil without; lease is the lease it
	// held when the host came up.
	dhcp  *dhcp.Client
	lease dhcp.ClientLease
	// ll is -addr ipv4ll's client, nil without; llAddr is the address
	// it held when the host came up.
	ll     *ipv4ll.Client
	llAddr netip.Addr
	// iperf3 are the counters of the -serve iperf3 server, under
	// "Iperf3."; nil without it.
	iperf3 *iperf3.ServerStats
}

// Metrics returns the stack's counters and gauges with the kernel's
// counters of the TAP device (TAP.<nic>.).
func (h *host) Metrics() stats.Snapshot {
	m := h.stack.Metrics()
	h.kernel.addTo(m, h.nic)
	if h.ring != nil {
		m.Add("Ring."+h.nic, h.ring.Stats())
	}
	if h.iperf3 != nil {
		m.Add("Iperf3", h.iperf3)
	}
	return m
}

// openLink opens the link the flags name and returns it with its NIC's
// name. A -ring-listen link waits for its peer, or for ctx's end.
func openLink(ctx context.Context, c *linkConfig, log *slog.Logger) (link.Endpoint, string, error) {
	if c.isRing() {
		// Offloads unless -impair, as on a TAP: the peer takes
		// partial checksums and 64 KiB super-segments whole when it
		// offers them too.
		o := shm.Options{MTU: c.mtu, MAC: c.mac, Offload: c.impair == "", RingSize: c.ringSize}
		if c.ring != "" {
			ep, err := shm.Dial(c.ring, o)
			if err != nil {
				return nil, "", fmt.Errorf("attaching to the ring: %w", err)
			}
			return ep, ringNIC, nil
		}
		ep, err := acceptRing(ctx, c.ringListen, o, log)
		if err != nil {
			return nil, "", err
		}
		return ep, ringNIC, nil
	}
	if c.socket != "" {
		ep, err := stream.Listen(c.socket, stream.Options{MTU: c.mtu, MAC: c.mac})
		if err != nil {
			return nil, "", fmt.Errorf("listening for a VM: %w", err)
		}
		return ep, socketNIC, nil
	}
	// With no -mac, tap picks a random locally administered address, so
	// that GoNet's station never collides with a manufacturer's address
	// or with the kernel's side of the TAP.
	// Offloads (checksums and 64 KiB TCP super-segments across the TAP)
	// unless -impair: its losses and corruption are meant for the frames
	// a wire carries.
	dev, err := tap.Open(c.tap, tap.Options{MTU: c.mtu, MAC: c.mac, Offload: c.impair == "", Queues: c.tapQueues, TxQueueLen: c.tapTxQueueLen, Spin: c.tapSpin})
	if err != nil {
		return nil, "", fmt.Errorf("opening TAP device %s: %w", c.tap, err)
	}
	// The kernel names the device when -tap is a pattern ("gn%d").
	return dev, dev.Name(), nil
}

// bringUp opens the link, wraps it as the flags ask, and starts a stack on
// it with its address and default route. On error it leaves nothing open.
func bringUp(ctx context.Context, c *linkConfig, log *slog.Logger) (*host, error) {
	ep, nic, err := openLink(ctx, c, log)
	if err != nil {
		return nil, err
	}
	h, err := bringUpOn(c, ep, nic, log)
	if r, isRing := ep.(*shm.Endpoint); isRing && err == nil {
		h.ring = r
	}
	if d, isTAP := ep.(*tap.Endpoint); isTAP && err == nil {
		// Its own counters: each write the kernel refused, by cause.
		h.stack.AddStats("Link."+nic, d.Stats())
	}
	if err != nil || c.socket != "" || c.isRing() {
		return h, err
	}
	// The TAP device is in this namespace: read its counters from here.
	conn, err := rtnl.Dial()
	if err != nil {
		h.Close()
		return nil, err
	}
	h.kernel = &kernelCounters{conn: conn, dev: nic}
	return h, nil
}

// bringUpOn wraps ep as the flags ask and starts a stack on it as NIC nic,
// with -addr when given and the default route. It takes ep: on error
// nothing is left open.
func bringUpOn(c *linkConfig, ep link.Endpoint, nic string, log *slog.Logger) (*host, error) {
	var capture *pcap.Endpoint

	// The order is stack ← pcap ← fault ← tap. The capture sits next to
	// the stack, so it holds exactly the frames the stack sent and
	// received: a frame -impair drops on the way in is not in it (the
	// stack never saw it), and one it drops on the way out is (the stack
	// sent it, and will retransmit it). Read that way a capture explains
	// the stack's behaviour and agrees with its counters; the wire's
	// view is what tcpdump on the TAP shows.
	if c.impair != "" {
		ep = fault.New(ep, c.fault)
	}
	if c.pcap != "" {
		p, err := pcap.Create(ep, c.pcap)
		if err != nil {
			ep.Close()
			return nil, fmt.Errorf("creating capture file %s: %w", c.pcap, err)
		}
		ep, capture = p, p
	}

	var nd ndp.Config
	if !c.noIPv6 {
		var err error
		if nd, err = c.ndpConfig(); err != nil {
			ep.Close()
			return nil, err
		}
	}
	gc := stack.TuneGC(c.memory)
	log.Info("collector set", "gogc", gcPercent(gc.Percent), "gogc_from_env", gc.PercentFromEnv,
		"gomemlimit", gc.Limit, "gomemlimit_from_env", gc.LimitFromEnv)
	s := stack.New(stack.Config{MemoryLimit: c.memory, TCP: tcp.Config{ECN: c.ecn}, Logger: log, NoIPv6: c.noIPv6, NDP: nd,
		NoDHCPv6: !c.dhcpv6 || c.router})
	h := &host{stack: s, nic: nic, mac: ep.MAC(), name: c.hostname, capture: capture}
	if err := s.AddNIC(h.nic, ep); err != nil {
		s.Close()
		ep.Close()
		return nil, fmt.Errorf("attaching %s to the stack: %w", h.nic, err)
	}
	// From here the stack owns the endpoint, and closes it (flushing the
	// capture) when it closes.
	if err := h.configure(c); err != nil {
		s.Close()
		return nil, err
	}
	return h, nil
}

// hostname is the host's name: -hostname, or gonet- and the last three
// bytes of its MAC, which tell hosts on one link apart as the MAC does.
func (h *host) hostname() string {
	if h.name != "" {
		return h.name
	}
	m := h.mac
	return fmt.Sprintf("gonet-%02x%02x%02x", m[len(m)-3], m[len(m)-2], m[len(m)-1])
}

// dadTimeout bounds the wait for duplicate address detection: RFC 4862
// section 5.4.2 delays the first solicitation by up to
// MAX_RTR_SOLICITATION_DELAY, then waits RetransTimer after each of
// DupAddrDetectTransmits (1 s, 1 s, 1 by default), with room to spare.
const dadTimeout = 10 * time.Second

// configure gives the host -addr's addresses and -gw's routes. It returns
// once the IPv6 addresses are usable, duplicate address detection over
// (or, with no -addr, the link-local address), so that the ready line
// means the host answers on every address it shows; a duplicate is an
// error, since the user asked for that address.
func (h *host) configure(c *linkConfig) error {
	var wait []netip.Addr
	for _, p := range c.addrs {
		if err := h.addAddress(p, c.acd); err != nil {
			return err
		}
		if p.Addr().Is6() {
			wait = append(wait, p.Addr())
		}
	}
	h.addrs = slices.Clone(c.addrs)
	// A router (the gateway) waits for its own addresses itself
	// (gateway.WaitIPv6), their DAD beside the link-local address's.
	if !c.noIPv6 && !c.router {
		ready, err := h.awaitDAD(wait, len(c.addrs) == 0, dadTimeout)
		if err != nil {
			return err
		}
		if len(c.addrs) == 0 && !c.dhcp {
			h.addrs = ready
		}
	}
	if len(c.static) > 0 {
		if err := h.stack.SetHosts(c.static); err != nil {
			return err
		}
	}
	if len(c.dns) > 0 || len(c.search) > 0 {
		if err := h.stack.SetDNS(stack.DNSConfig{Servers: c.dns, Search: c.search}); err != nil {
			return err
		}
	}
	if c.ipv4ll {
		// Started first, so that its probes run while DHCP waits for
		// a server.
		ll, err := h.startIPv4LL(&c.ipv4llConfig)
		if err != nil {
			return err
		}
		h.ll = ll
	}
	if c.dhcp {
		err := h.startDHCP(c, dhcpTimeout)
		switch {
		case errors.Is(err, errNoLease) && h.ll != nil:
			// What the link-local address is for (RFC 3927 section
			// 1.9): the host goes on with it, and the client keeps
			// asking.
			h.stack.Logger().Warn("no DHCP lease yet: going on with the IPv4 link-local address, the client asking still", "nic", h.nic, "err", err)
		case err != nil:
			return err
		}
	}
	if h.ll != nil {
		if err := h.awaitIPv4LL(ipv4llTimeout); err != nil {
			return err
		}
	}
	// The gateways last: an IPv6 one on an -addr's network is on-link
	// once that address is.
	for _, gw := range c.gws {
		if err := h.stack.SetDefaultGateway(gw, h.nic); err != nil {
			return fmt.Errorf("setting default gateway %v on %s: %w", gw, h.nic, err)
		}
	}
	return nil
}

// dhcpTimeout bounds the wait for a lease, as dhclient's timeout (60
// seconds) does: DISCOVERs at 0, 4, 12, 28 and 60 seconds or so (RFC 2131
// section 4.1); or with -dhcp-lease and no server answering, INIT-REBOOT's
// REQUESTs until 64 s at most, then the remembered lease, probed for (up
// to 7 s).
const dhcpTimeout = 75 * time.Second

// startDHCP starts -addr dhcp's client and waits up to timeout for its
// first lease. With -dhcp-lease it asks first for the address the file
// holds, and keeps every lease it gets there.
func (h *host) startDHCP(c *linkConfig, timeout time.Duration) error {
	log := h.stack.Logger()
	// -dns or -search configured the resolver by hand: the lease's
	// servers and domains are kept in it, not applied.
	cfg := dhcp.ClientConfig{NoDNS: len(c.dns) > 0 || len(c.search) > 0, Hostname: h.hostname()}
	if c.dhcpLease != "" {
		switch l, err := dhcp.LoadLease(c.dhcpLease); {
		case err == nil:
			cfg.Remembered = &l
		case !errors.Is(err, fs.ErrNotExist):
			log.Warn("DHCP lease file unreadable: asking for a new lease", "file", c.dhcpLease, "err", err)
		}
	}
	bound := make(chan dhcp.ClientLease, 1)
	cfg.Notify = func(e dhcp.Event) {
		if e.Kind != dhcp.LeaseBound && e.Kind != dhcp.LeaseRenewed {
			return
		}
		if c.dhcpLease != "" {
			if err := dhcp.SaveLease(c.dhcpLease, e.Lease); err != nil {
				log.Warn("DHCP lease not kept", "file", c.dhcpLease, "err", err)
			}
		}
		select {
		case bound <- e.Lease:
		default:
		}
	}
	// The client outlives the command's context: Close releases the
	// lease (RFC 2131 section 4.4.6) before the stack stops.
	client, err := dhcp.StartOn(context.Background(), h.stack, h.nic, cfg)
	if err != nil {
		return err
	}
	h.dhcp = client
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case h.lease = <-bound:
		return nil
	case <-t.C:
		return fmt.Errorf("%w on %s after %v: %d DISCOVERs sent, %d OFFERs and %d ACKs received", errNoLease, h.nic, timeout,
			client.Stats.OutDiscovers.Load(), client.Stats.InOffers.Load(), client.Stats.InAcks.Load())
	}
}

// errNoLease is startDHCP's error when no server gave a lease in time.
var errNoLease = errors.New("no DHCP lease")

// ipv4llTimeout bounds the wait for a link-local address: a probe takes 4
// to 7 s (RFC 3927 section 2.2), and past ten addresses found in use the
// probes slow to one a minute (section 2.2.1).
const ipv4llTimeout = 90 * time.Second

// awaitIPv4LL waits up to timeout for -addr ipv4ll's first address.
func (h *host) awaitIPv4LL(timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	a, err := h.ll.Wait(ctx)
	if err != nil {
		return fmt.Errorf("no IPv4 link-local address on %s after %v: %d probed for, %d in use", h.nic, timeout,
			h.ll.Stats.Probes.Load(), h.ll.Stats.InUse.Load())
	}
	h.llAddr = a
	return nil
}

// awaitDAD waits until each of addrs has passed duplicate address
// detection and, with linkLocal, until a link-local address has, which it
// returns. It fails on a duplicate (RFC 4862 section 5.4.5: the address is
// not used) and after timeout. ndp announces no event for it, so it polls
// the NIC's addresses: a start-up wait of a second or two.
func (h *host) awaitDAD(addrs []netip.Addr, linkLocal bool, timeout time.Duration) ([]netip.Prefix, error) {
	deadline := time.Now().Add(timeout)
	for {
		list, err := h.stack.Addresses6(h.nic)
		if err != nil {
			return nil, err
		}
		pending := 0
		for _, want := range addrs {
			st, ok := addrState(list, want)
			switch {
			case st == ndp.Duplicate:
				return nil, fmt.Errorf("%v is already in use on %s's link: duplicate address detection found another node with it (RFC 4862 section 5.4)", want, h.nic)
			case !ok || st == ndp.Tentative:
				pending++
			}
		}
		var ll []netip.Prefix
		if linkLocal {
			for _, a := range list {
				if a.Prefix.Addr().IsLinkLocalUnicast() && a.State.Usable() {
					ll = append(ll, a.Prefix)
				}
			}
			if len(ll) == 0 {
				pending++
			}
		}
		if pending == 0 {
			return ll, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("IPv6 addresses on %s still tentative after %v: duplicate address detection did not end", h.nic, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// addrState returns the state of addr in list.
func addrState(list []stack.Address6, addr netip.Addr) (ndp.AddrState, bool) {
	for _, a := range list {
		if a.Prefix.Addr() == addr {
			return a.State, true
		}
	}
	return 0, false
}

// releaseDHCP gives the lease back, as a clean shutdown does (RFC 2131
// section 4.4.6), and waits up to timeout for the DHCPRELEASE to leave the
// NIC: closing the stack closes the link at once and drops what is still
// queued. The RELEASE is unicast to the server: when ARP has not resolved
// the server yet, a request goes out first and the RELEASE after the
// answer, two frames.
func (h *host) releaseDHCP(timeout time.Duration) {
	l, ok := h.dhcp.Lease()
	frames := 1
	if ok {
		neigh, _ := h.stack.Neighbors(h.nic)
		if !slices.ContainsFunc(neigh, func(e stack.Neighbor) bool { return e.IP == l.Server && e.Expires.After(time.Now()) }) {
			frames = 2
		}
	}
	sent := func() int64 { return h.stack.Metrics()["NIC."+h.nic+".TxFrames"].Value }
	before := sent()
	h.dhcp.Release()
	if !ok {
		return
	}
	for deadline := time.Now().Add(timeout); sent() < before+int64(frames) && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
}

// Close stops the stack, which closes the link under it and the capture
// file if there is one. A capture cut short by a write error (a full disk)
// is reported here, since the frames themselves flowed on regardless.
func (h *host) Close() error {
	if h.dhcp != nil {
		h.releaseDHCP(time.Second)
	}
	if h.ll != nil {
		h.ll.Close()
	}
	err := errors.Join(h.stack.Close(), h.kernel.Close())
	if h.capture != nil {
		if cerr := h.capture.Err(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("capture file incomplete: %w", cerr))
		}
	}
	return err
}

// gcPercent writes a GOGC value as the environment variable would.
func gcPercent(p int) string {
	if p < 0 {
		return "off"
	}
	return strconv.Itoa(p)
}

// acceptRing listens on path for one GoNet process to attach with -ring,
// and returns the link to it. The socket file goes once the peer has
// come: a ring has two ends. A peer whose handshake fails (another MTU,
// say) is logged and the next awaited.
func acceptRing(ctx context.Context, path string, o shm.Options, log *slog.Logger) (*shm.Endpoint, error) {
	ln, err := shm.Listen(path, o)
	if err != nil {
		return nil, fmt.Errorf("listening for a ring peer: %w", err)
	}
	defer ln.Close()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	log.Info("waiting for a GoNet process to attach to the ring", "path", path)
	for {
		ep, err := ln.Accept()
		switch {
		case err == nil:
			return ep, nil
		case ctx.Err() != nil:
			return nil, fmt.Errorf("waiting for a ring peer: %w", ctx.Err())
		case errors.Is(err, net.ErrClosed):
			return nil, err
		}
		log.Warn("a ring peer's handshake failed", "err", err)
	}
}
