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
	dst := &net.UDPAddr{IP: net.ParseIP(addr)}
	proto := echo4
	if family(addr) == 6 {
		proto = echo6
	}
	conns := make([]*pingConn, n)
	for i := range conns {
		c, err := listenPing(proto)
		if err != nil {
			for _, c := range conns[:i] {
				c.Close()
			}
			return PingResult{}, err
		}
		conns[i] = c
	}
	start := time.Now().Add(50 * time.Millisecond)
	end := start.Add(dur)
	var mu sync.Mutex
	res := PingResult{Pingers: n}
	var all, wire []float64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Go(func() {
			defer c.Close()
			first := start
			if interval > 0 {
				first = first.Add(rand.N(interval))
			}
			rtts, wires, sent, lost := pinger(c, proto, dst, first, end, interval)
			mu.Lock()
			all = append(all, rtts...)
			wire = append(wire, wires...)
			res.Sent += sent
			res.Lost += lost
			mu.Unlock()
		})
	}
	wg.Wait()
	res.RTT = summarise(all)
	res.Wire = summarise(wire)
	res.RepliesPerS = float64(res.RTT.Samples) / dur.Seconds()
	return res, nil
}

func pinger(c *pingConn, proto echo, dst net.Addr, next, end time.Time, interval time.Duration) (rtts, wire []float64, sent, lost int) {
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
		msg := icmp.Message{Type: proto.request, Body: &icmp.Echo{Seq: seq & 0xffff, Data: payload}}
		b, _ := msg.Marshal(nil)
		t0 := time.Now()
		if _, err := c.WriteTo(b, dst); err != nil {
			lost++
			sent++
			next = next.Add(interval)
			continue
		}
		sent++
		c.SetReadDeadline(t0.Add(time.Second))
		for {
			m, oobn, _, _, err := c.ReadMsgUDP(buf, oob)
			if err != nil {
				lost++
				break
			}
			rtt := time.Since(t0)
			r, err := icmp.ParseMessage(proto.proto, buf[:m])
			if err != nil || r.Type != proto.reply {
				continue
			}
			if e, ok := r.Body.(*icmp.Echo); !ok || e.Seq != seq&0xffff {
				continue // a late reply to an earlier request
			}
			rtts = append(rtts, us(rtt))
			if in, ok := softwareStamp(oob[:oobn]); ok {
				if out, ok := c.lastSent(); ok && in.After(out) {
					wire = append(wire, us(in.Sub(out)))
				}
			}
			break
		}
		next = next.Add(interval)
		if now := time.Now(); next.Before(now) {
			next = now // behind schedule: send at once, do not burst
		}
	}
}
