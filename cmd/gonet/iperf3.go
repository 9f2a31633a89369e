package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gonetstack/gonet/iperf3"
)

var iperf3Command = &command{
	name:    "iperf3",
	summary: "measure bandwidth, loss and jitter against an iperf3 server, from a GoNet host",
	usage:   "gonet iperf3 {-tap NAME | -ring PATH} [-addr ADDR/NN]... [-gw ADDR|NAME]... -c HOST [-p PORT] [-u] [-R] [-P N] [-b RATE] [-l LEN] [-t SECS] [-J] [link flags]",
	about: `Brings up a GoNet stack on the TAP device (or ring), as gonet up does, and
runs one iperf3 test from it against the iperf3 server at HOST (an IPv4 or
IPv6 address): the stock iperf3 -s, or a GoNet daemon's -serve iperf3. The
flags are iperf3's: -u for UDP (TCP otherwise), -R for the server to send,
-P for parallel streams, -b for each stream's rate in bits per second (K, M,
G: powers of 1000; UDP's default is 1M), -l for the block length (K, M:
powers of 1024), -t for the duration in seconds. Prints a summary as
iperf3's client does, or with -J the JSON iperf3 -J prints (its "end"
sums; no interval reports). Exits 0 when the test ran, 1 when it did not.`,
	flags: func() *flag.FlagSet { fs, _ := iperf3Flags(); return fs },
	run:   runIperf3,
}

// iperf3Config is gonet iperf3's command line, parsed.
type iperf3Config struct {
	link   linkConfig
	host   string
	server netip.Addr
	port   int
	test   iperf3.Config
	json   bool
}

func iperf3Flags() (*flag.FlagSet, *iperf3Config) {
	c := &iperf3Config{port: iperf3.Port, test: iperf3.Config{Duration: iperf3.DefaultDuration}}
	fs := newFlagSet("iperf3")
	c.link.register(fs)
	c.link.registerRing(fs)
	fs.StringVar(&c.host, "c", "", "run a test against the iperf3 server at `HOST`: an IP address, or a name from -host or -hosts, else asked over GoNet of -dns's server or the DHCP lease's")
	fs.IntVar(&c.port, "p", c.port, "the server's `PORT`")
	fs.BoolVar(&c.test.UDP, "u", false, "test UDP (default: TCP)")
	fs.BoolVar(&c.test.Reverse, "R", false, "reverse: the server sends, GoNet receives")
	fs.IntVar(&c.test.Parallel, "P", 1, "run `N` parallel streams")
	fs.Func("b", "send at `RATE` bits/s per stream, as 50M (default: unlimited for TCP, 1M for UDP)", func(s string) error {
		r, err := parseUnits(s, 1000)
		c.test.Rate = r
		return err
	})
	fs.Func("l", "write blocks of `LEN` bytes, as 1460 or 128K (default: 128K for TCP, 1460 for UDP)", func(s string) error {
		n, err := parseUnits(s, 1024)
		if err == nil && n > math.MaxInt32 {
			err = errors.New("too long")
		}
		c.test.Len = int(n)
		return err
	})
	fs.Func("t", "run for `SECS` seconds (default 10)", func(s string) error {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 86400 {
			return errors.New("not a whole number of seconds in 1..86400")
		}
		c.test.Duration = time.Duration(n) * time.Second
		return nil
	})
	fs.BoolVar(&c.json, "J", false, "print the result as JSON, as iperf3 -J does")
	return fs, c
}

// parseUnits parses a count with an optional K, M, G or T suffix in
// powers of base, as iperf3 reads -b (1000) and -l (1024).
func parseUnits(s string, base float64) (uint64, error) {
	mult := 1.0
	if n := len(s); n > 0 {
		if i := strings.IndexByte("kmgtKMGT", s[n-1]); i >= 0 {
			mult = math.Pow(base, float64(i%4+1))
			s = s[:n-1]
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 0 || math.IsNaN(f) || f*mult >= math.MaxUint64 {
		return 0, errors.New("not a count, as in 1460, 128K or 50M")
	}
	return uint64(f * mult), nil
}

// parseIperf3 parses gonet iperf3's arguments.
func parseIperf3(args []string) (*iperf3Config, error) {
	fs, c := iperf3Flags()
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return nil, err
	}
	if len(pos) > 0 {
		return nil, usagef("unexpected argument %q (the server is -c HOST)", pos[0])
	}
	if c.host == "" {
		return nil, usagef("missing -c HOST, the iperf3 server to test against")
	}
	byName := false
	if c.server, err = parseHostAddr(c.host); err != nil {
		if _, perr := netip.ParseAddr(c.host); perr == nil || !validHostName(c.host) {
			return nil, usagef("-c %q: %v, nor a host name", c.host, err)
		}
		byName = true // resolved over GoNet when the test dials
	}
	if err := c.link.check(); err != nil {
		return nil, err
	}
	switch {
	case byName && len(c.link.dns) == 0 && !c.link.dhcp && c.link.staticAddrs(c.host) == nil:
		return nil, usagef("-c %q is a name: give -dns, the DNS server to ask, -addr dhcp, or -host %s=ADDR", c.host, c.host)
	case byName:
	case c.server.Is4() && !hasIPv4(c.link.addrs) && !c.link.dhcp && !c.link.ipv4ll:
		return nil, usagef("-addr is required for an IPv4 server: GoNet's IPv4 address and prefix, as in 10.0.0.2/24")
	case c.server.Is6() && c.link.noIPv6:
		return nil, usagef("server %v is IPv6, and -no-ipv6 turns IPv6 off", c.server)
	case c.port < 1 || c.port > 65535:
		return nil, usagef("-p %d is not a port", c.port)
	case c.test.Parallel < 1 || c.test.Parallel > 128:
		return nil, usagef("-P %d is outside 1..128", c.test.Parallel)
	case c.test.UDP && c.test.Len != 0 && c.test.Len < iperf3.HeaderLen:
		return nil, usagef("-l %d is shorter than the UDP header iperf3 puts in each datagram, %d bytes", c.test.Len, iperf3.HeaderLen)
	}
	host := c.host
	if !byName {
		host = c.server.String()
	}
	c.test.Addr = net.JoinHostPort(host, strconv.Itoa(c.port))
	return c, nil
}

func runIperf3(ctx context.Context, cmd *command, out *output, args []string) int {
	c, err := parseIperf3(args)
	if err != nil {
		return reportParseError(out, cmd, err)
	}
	// The test's report is the output; the stack's events would be in
	// its way.
	h, err := bringUp(ctx, &c.link, slog.New(slog.DiscardHandler))
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet iperf3: %v\n", err)
		return exitFail
	}
	if line := c.link.describeImpairment("iperf3"); line != "" {
		fmt.Fprintln(out.stderr, line)
	}
	defer h.Close()
	res, err := iperf3.Run(ctx, h.stack.DialContext, c.test)
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet iperf3: %v\n", err)
		return exitFail
	}
	if c.json {
		err = res.WriteJSON(out.stdout)
	} else {
		err = res.WriteText(out.stdout)
	}
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet iperf3: writing the result: %v\n", err)
		return exitFail
	}
	return exitOK
}
