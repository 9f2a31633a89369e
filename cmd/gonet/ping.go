package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/icmpv6"
)

// icmpEchoHeaderLen is the ICMP echo header (RFC 792): type, code,
// checksum, identifier, sequence number.
const icmpEchoHeaderLen = 8

// maxPingSize is the most payload an echo request can carry in one IPv4
// datagram: 65535 less the IPv4 header (20) and the ICMP header (8).
const maxPingSize = 65535 - 20 - icmpEchoHeaderLen

// maxPing6Size is the same for IPv6, whose payload length, unlike IPv4's
// total length, does not count the fixed header: 65535 less the ICMPv6
// echo header (8).
const maxPing6Size = icmpv6.MaxPingSize

// ipHeaderLen is the header ping adds to the sizes it prints: IPv4's 20,
// IPv6's 40, as the kernel's ping does.
func ipHeaderLen(dst netip.Addr) int {
	if dst.Is4() {
		return 20
	}
	return 40
}

var pingCommand = &command{
	name:    "ping",
	summary: "ping an address from a GoNet host on a TAP device",
	usage:   "gonet ping {-tap NAME | -ring PATH} [-addr ADDR/NN | -addr dhcp | -addr ipv4ll]... [-gw ADDR|NAME]... [-c N] [-s SIZE] [-i INTERVAL] [-W TIMEOUT] [link flags] DEST",
	about: `Brings up a GoNet stack on the TAP device, as gonet up does, and sends ICMP
echo requests to DEST (an IPv4 or IPv6 address, a link-local one with its
zone, as fe80::1%tap0, or a name: from -host or -hosts, else asked over
GoNet of -dns's server or the DHCP lease's) with the stack's own ping client, ICMP or ICMPv6 by
DEST's family, printing a line per reply and a summary as the kernel's
ping does. The IPv6 addresses pass duplicate address detection first. Exits 0
if any reply came back, 1 if none did, 2 on a bad command line. Ctrl-C
stops early and still prints the summary. With -ring PATH instead of -tap,
the stack attaches to a GoNet process listening with gonet up -ring-listen
PATH, over a shared-memory ring.`,
	flags: func() *flag.FlagSet { fs, _ := pingFlags(); return fs },
	run:   runPing,
}

// pingConfig is gonet ping's command line, parsed.
type pingConfig struct {
	link linkConfig
	// dest is DEST's address: given, or resolved over GoNet from name.
	dest     netip.Addr
	name     string
	count    int           // 0: until interrupted
	size     int           // ICMP payload bytes
	interval time.Duration // between requests
	timeout  time.Duration // wait for each reply
}

func pingFlags() (*flag.FlagSet, *pingConfig) {
	c := &pingConfig{size: 56, interval: time.Second, timeout: 2 * time.Second}
	fs := newFlagSet("ping")
	c.link.register(fs)
	c.link.registerRing(fs)
	fs.IntVar(&c.count, "c", 0, "stop after `N` requests (default: until interrupted)")
	fs.IntVar(&c.size, "s", c.size, "send `SIZE` bytes of payload, 0.."+strconv.Itoa(maxPingSize)+" (IPv6: "+strconv.Itoa(maxPing6Size)+")")
	fs.Var((*secondsFlag)(&c.interval), "i", "wait `INTERVAL` between requests, in seconds or as 200ms")
	fs.Var((*secondsFlag)(&c.timeout), "W", "wait `TIMEOUT` for each reply, in seconds or as 500ms")
	return fs, c
}

// parsePing parses gonet ping's arguments. Flags may follow DEST, as with
// the kernel's ping.
func parsePing(args []string) (*pingConfig, error) {
	fs, c := pingFlags()
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	switch len(pos) {
	case 0:
		return nil, usagef("missing DEST, the address to ping")
	case 1:
	default:
		return nil, usagef("unexpected argument %q after DEST %q", pos[1], pos[0])
	}
	if c.dest, err = parseHostAddr(pos[0]); err != nil {
		if _, perr := netip.ParseAddr(pos[0]); perr == nil || !validHostName(pos[0]) {
			return nil, usagef("DEST %q: %v, nor a host name", pos[0], err)
		}
		// A name, resolved once the stack is up.
		c.name = pos[0]
	}
	if err := c.link.check(); err != nil {
		return nil, err
	}
	maxSize := maxPingSize
	switch {
	case c.name != "":
		if len(c.link.dns) == 0 && !c.link.dhcp && c.link.staticAddrs(c.name) == nil {
			return nil, usagef("DEST %q is a name: give -dns, the DNS server to ask, -addr dhcp, or -host %s=ADDR", c.name, c.name)
		}
		if !c.link.noIPv6 {
			maxSize = min(maxPingSize, maxPing6Size)
		}
	case c.dest.Is4() && !hasIPv4(c.link.addrs) && !c.link.dhcp && !c.link.ipv4ll:
		// IPv6 forms its own addresses; IPv4 has only -addr's.
		return nil, usagef("-addr is required for an IPv4 DEST: GoNet's IPv4 address and prefix, as in 10.0.0.2/24, or dhcp, or ipv4ll")
	case c.dest.Is6() && c.link.noIPv6:
		return nil, usagef("DEST %v is IPv6, and -no-ipv6 turns IPv6 off", c.dest)
	case c.dest.Is6():
		maxSize = maxPing6Size
	}
	switch {
	case c.count < 0:
		return nil, usagef("-c %d is negative", c.count)
	case c.size < 0 || c.size > maxSize:
		return nil, usagef("-s %d is outside 0..%d", c.size, maxSize)
	case c.timeout == 0:
		return nil, usagef("-W 0 would wait for no reply")
	}
	return c, nil
}

func runPing(ctx context.Context, cmd *command, out *output, args []string) int {
	c, err := parsePing(args)
	if err != nil {
		return reportParseError(out, cmd, err)
	}
	// ping's own lines are its output; the stack's events (the
	// addresses, the NIC) would only be in their way.
	h, err := bringUp(ctx, &c.link, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet ping: %v\n", err)
		return exitFail
	}
	if line := c.link.describeImpairment("ping"); line != "" {
		fmt.Fprintln(out.stderr, line)
	}
	defer h.Close()

	shown := c.dest.String()
	if c.name != "" {
		if c.dest, err = resolvePingDest(ctx, h, c); err != nil {
			fmt.Fprintf(out.stderr, "gonet ping: %v\n", err)
			return exitFail
		}
		shown = c.name
	}
	fmt.Fprintf(out.stdout, "PING %s (%v) %d(%d) bytes of data.\n", shown, c.dest, c.size, c.size+ipHeaderLen(c.dest)+icmpEchoHeaderLen)
	var st pingStats
	start := time.Now()
	// Requests go out every interval, counted from one start to the
	// next as the kernel's ping does; after a late reply the next goes
	// at once, without trying to catch up on the lost time.
	next := start
	for seq := 1; c.count == 0 || seq <= c.count; seq++ {
		if !clock.Sleep(ctx, clock.Real{}, time.Until(next)) {
			break
		}
		if now := time.Now(); next.Before(now) {
			next = now
		}
		next = next.Add(c.interval)
		pctx, cancel := context.WithTimeout(ctx, c.timeout)
		rtt, err := h.stack.Ping(pctx, c.dest, c.size)
		cancel()
		if ctx.Err() != nil {
			break // interrupted: this request's fate is unknown
		}
		st.sent++
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				fmt.Fprintf(out.stdout, "no reply from %v: icmp_seq=%d within %v\n", c.dest, seq, c.timeout)
			} else {
				fmt.Fprintf(out.stdout, "from %v: icmp_seq=%d: %v\n", c.dest, seq, err)
			}
			continue
		}
		st.add(rtt)
		fmt.Fprintf(out.stdout, "%d bytes from %v: icmp_seq=%d time=%s ms\n", c.size+icmpEchoHeaderLen, c.dest, seq, formatMS(rtt))
	}
	fmt.Fprintf(out.stdout, "\n--- %s ping statistics ---\n", shown)
	st.writeSummary(out.stdout, time.Since(start))
	if st.received() == 0 {
		return exitFail
	}
	return exitOK
}

// resolvePingDest resolves DEST's name over the stack: an address of a
// family the host can send from, IPv4 first when it has an IPv4 address
// (as the kernel's ping without -4 or -6 takes the resolver's first).
func resolvePingDest(ctx context.Context, h *host, c *pingConfig) (netip.Addr, error) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	network := "ip"
	switch {
	case c.link.noIPv6:
		network = "ip4"
	case !hasIPv4(h.addrs) && h.lease.Addr.Addr() == (netip.Addr{}) && h.ll == nil:
		network = "ip6"
	}
	addrs, err := h.stack.LookupNetIP(rctx, network, c.name)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("%s: %w", c.name, err)
	}
	for _, a := range addrs {
		if a.Is6() && c.size > maxPing6Size || a.Is4() && c.size > maxPingSize {
			continue
		}
		return a, nil
	}
	return netip.Addr{}, fmt.Errorf("%s: no address takes -s %d", c.name, c.size)
}

// validHostName reports whether s can be a host name to resolve: labels of
// letters, digits, hyphens and underscores, with an optional final dot.
func validHostName(s string) bool {
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// hasIPv4 reports whether addrs holds an IPv4 address.
func hasIPv4(addrs []netip.Prefix) bool {
	for _, p := range addrs {
		if p.Addr().Is4() {
			return true
		}
	}
	return false
}

// pingStats are the figures of a run of pings.
type pingStats struct {
	sent int
	rtts []time.Duration
}

func (s *pingStats) add(rtt time.Duration) { s.rtts = append(s.rtts, rtt) }

func (s *pingStats) received() int { return len(s.rtts) }

// minAvgMaxMdev returns the round-trip figures the kernel's ping prints;
// mdev is the population standard deviation.
func (s *pingStats) minAvgMaxMdev() (lo, avg, hi, mdev time.Duration) {
	if len(s.rtts) == 0 {
		return 0, 0, 0, 0
	}
	lo, hi = s.rtts[0], s.rtts[0]
	var sum, sumSq float64
	for _, r := range s.rtts {
		lo, hi = min(lo, r), max(hi, r)
		sum += float64(r)
		sumSq += float64(r) * float64(r)
	}
	n := float64(len(s.rtts))
	mean := sum / n
	return lo, time.Duration(mean), hi, time.Duration(math.Sqrt(max(0, sumSq/n-mean*mean)))
}

// writeSummary prints the kernel ping's closing lines: counts and loss, then
// round-trip times when there were replies.
func (s *pingStats) writeSummary(w io.Writer, elapsed time.Duration) {
	loss := 0.0
	if s.sent > 0 {
		loss = 100 * float64(s.sent-s.received()) / float64(s.sent)
	}
	fmt.Fprintf(w, "%d packets transmitted, %d received, %s%% packet loss, time %dms\n",
		s.sent, s.received(), strconv.FormatFloat(loss, 'g', 4, 64), elapsed.Milliseconds())
	if s.received() > 0 {
		lo, avg, hi, mdev := s.minAvgMaxMdev()
		fmt.Fprintf(w, "rtt min/avg/max/mdev = %.3f/%.3f/%.3f/%.3f ms\n", ms(lo), ms(avg), ms(hi), ms(mdev))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// formatMS writes a round-trip time in milliseconds with three significant
// digits or more, as the kernel's ping does (0.045, 1.23, 12.3, 123).
func formatMS(d time.Duration) string {
	m := ms(d)
	switch {
	case m < 1:
		return strconv.FormatFloat(m, 'f', 3, 64)
	case m < 10:
		return strconv.FormatFloat(m, 'f', 2, 64)
	case m < 100:
		return strconv.FormatFloat(m, 'f', 1, 64)
	}
	return strconv.FormatFloat(m, 'f', 0, 64)
}
