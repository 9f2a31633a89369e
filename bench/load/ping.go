package load

import (
	"math/rand/v2"
	"net"
	"sync"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// PingResult is the ping workload's result.
type PingResult struct {
	Pingers int     `json:"pingers"`
	Sent    int     `json:"sent"`
	Lost    int     `json:"lost"` // no reply within a second
	RTT     Latency `json:"rtt"`
	// Wire is the round trip as the client's network device saw it:
	// from the request's leaving the device to the reply's reaching it,
	// by the kernel's software timestamps (SO_TIMESTAMPING). It is the
	// part of RTT that the server's stack and the link decide; the rest
	// is the client's own kernel and process, which the same client
	// pays whichever stack answers.
	Wire Latency `json:"wire"`
	// RepliesPerS is the replies received per second of the run: in a
	// closed loop, the rate of echoes the stack sustains.
	RepliesPerS float64 `json:"replies_s"`
	// Twin is the second address's result when the pingers took two in
	// turn (PingTwins).
	Twin *PingResult `json:"twin,omitempty"`
}

// echo is what a pinger needs of its family's ICMP: the address family,
// the echo message types, and the protocol number, which opens the
// datagram socket and which icmp.ParseMessage reads replies by.
type echo struct {
	family         int
	request, reply icmp.Type
	proto          int
}

var (
	// ICMP (RFC 792) on the kernel's "ping socket".
	echo4 = echo{unix.AF_INET, ipv4.ICMPTypeEcho, ipv4.ICMPTypeEchoReply, unix.IPPROTO_ICMP}
	// ICMPv6 (RFC 4443 section 4) on its IPv6 counterpart: Linux lets
	// the groups of net.ipv4.ping_group_range open both, and fills in
	// the checksum over the IPv6 pseudo-header itself.
	echo6 = echo{unix.AF_INET6, ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply, unix.IPPROTO_ICMPV6}
)

// Ping runs n concurrent pingers against addr (IPv4 or IPv6) for dur, each
// sending a 56-byte echo request every interval (as ping -i) and waiting up
// to a second for its reply; the pingers start at random phases so the load
// is spread. With interval 0 the loop is closed: each pinger sends its next
// request as soon as the reply to the last arrives (as ping -f with one
// request outstanding), so n requests are always in flight and the rate is
// whatever the stack sustains. Each pinger has an ICMP datagram socket of
// its own (the kernel's "ping socket", which demultiplexes replies by
// identifier as ping does), so the kernel side never wakes a thousand
// readers for one reply.
func Ping(addr string, n int, interval, dur time.Duration) (PingResult, error) {
	rs, err := ping([]string{addr}, n, interval, dur)
	if err != nil {
		return PingResult{}, err
	}
	return rs[0], nil
}

// PingTwins is Ping with each pinger's requests going to addr and twin in
// turn, one each: the server's address in two families, say. Each
// address's echoes meet the same run, the same threads and the same load,
// so that the two results differ by what the address costs alone; two
// runs one after the other differ by more (ARCHITECTURE.md, "IPv6"). The
// result is addr's, its Twin twin's.
func PingTwins(addr, twin string, n int, interval, dur time.Duration) (PingResult, error) {
	rs, err := ping([]string{addr, twin}, n, interval, dur)
	if err != nil {
		return PingResult{}, err
	}
	rs[0].Twin = &rs[1]
	return rs[0], nil
}

// ping runs the pingers, each with a socket per address, taking the
// addresses in turn, and returns each address's result.
func ping(addrs []string, n int, interval, dur time.Duration) ([]PingResult, error) {
	var conns []*pingConn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	pingers := make([][]*pingTarget, n)
	for i := range pingers {
		for _, addr := range addrs {
			proto := echo4
			if family(addr) == 6 {
				proto = echo6
			}
			c, err := listenPing(proto)
			if err != nil {
				return nil, err
			}
			conns = append(conns, c)
			pingers[i] = append(pingers[i], &pingTarget{c: c, proto: proto, dst: &net.UDPAddr{IP: net.ParseIP(addr)}})
		}
	}
	start := time.Now().Add(50 * time.Millisecond)
	end := start.Add(dur)
	var wg sync.WaitGroup
	for _, targets := range pingers {
		wg.Go(func() {
			first := start
			if interval > 0 {
				first = first.Add(rand.N(interval))
			}
			pinger(targets, first, end, interval)
		})
	}
	wg.Wait()
	res := make([]PingResult, len(addrs))
	for i := range res {
		var rtts, wire []float64
		res[i].Pingers = n
		for _, targets := range pingers {
			t := targets[i]
			rtts = append(rtts, t.rtts...)
			wire = append(wire, t.wire...)
			res[i].Sent += t.sent
			res[i].Lost += t.lost
		}
		res[i].RTT = summarise(rtts)
		res[i].Wire = summarise(wire)
		res[i].RepliesPerS = float64(res[i].RTT.Samples) / dur.Seconds()
	}
	return res, nil
}

// pingTarget is one address a pinger sends to, over its own socket, and
// what it measured there.
type pingTarget struct {
	c          *pingConn
	proto      echo
	dst        net.Addr
	rtts, wire []float64
	sent, lost int
}

// pinger sends a request every interval from next until end, to its
// targets in turn, and waits for each reply before the next request.
func pinger(targets []*pingTarget, next, end time.Time, interval time.Duration) {
	payload := make([]byte, 56)
	buf := make([]byte, 1500)
	oob := make([]byte, 512)
	for seq := 1; ; seq++ {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		if !time.Now().Before(end) {
			return
		}
		t := targets[(seq-1)%len(targets)]
		t.sent++
		if !t.echo(seq, payload, buf, oob) {
			t.lost++
		}
		next = next.Add(interval)
		if now := time.Now(); next.Before(now) {
			next = now // behind schedule: send at once, do not burst
		}
	}
}

// echo sends request seq and waits up to a second for its reply, which it
// times as the pinger saw it and at the device; false when no reply came.
func (t *pingTarget) echo(seq int, payload, buf, oob []byte) bool {
	msg := icmp.Message{Type: t.proto.request, Body: &icmp.Echo{Seq: seq & 0xffff, Data: payload}}
	b, _ := msg.Marshal(nil)
	t0 := time.Now()
	if _, err := t.c.WriteTo(b, t.dst); err != nil {
		return false
	}
	t.c.SetReadDeadline(t0.Add(time.Second))
	for {
		m, oobn, _, _, err := t.c.ReadMsgUDP(buf, oob)
		if err != nil {
			return false
		}
		rtt := time.Since(t0)
		r, err := icmp.ParseMessage(t.proto.proto, buf[:m])
		if err != nil || r.Type != t.proto.reply {
			continue
		}
		if e, ok := r.Body.(*icmp.Echo); !ok || e.Seq != seq&0xffff {
			continue // a late reply to an earlier request
		}
		t.rtts = append(t.rtts, us(rtt))
		if in, ok := softwareStamp(oob[:oobn]); ok {
			if out, ok := t.c.lastSent(); ok && in.After(out) {
				t.wire = append(t.wire, us(in.Sub(out)))
			}
		}
		return true
	}
}
