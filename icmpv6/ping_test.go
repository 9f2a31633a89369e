package icmpv6_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/icmpv6"
	"github.com/gonetstack/gonet/wire"
)

type pingResult struct {
	rtt time.Duration
	err error
}

// startPing runs a ping in the background and returns the request it
// sent, as the wire carries it.
func startPing(t *testing.T, h *harness, ctx context.Context, dst netip.Addr, size int) (sent, <-chan pingResult) {
	t.Helper()
	done := make(chan pingResult, 1)
	go func() {
		rtt, err := h.p.Ping(ctx, dst, size)
		done <- pingResult{rtt, err}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		// The wire is looked at after done: a ping whose context has
		// ended sends its request and returns at once, maybe between
		// the two looks. Its result goes back for waitPing.
		var ended *pingResult
		select {
		case r := <-done:
			ended = &r
		case <-time.After(100 * time.Microsecond):
		}
		if out := h.net.takeSent(); len(out) > 0 {
			if len(out) != 1 {
				t.Fatalf("ping sent %d datagrams", len(out))
			}
			if ended != nil {
				done <- *ended
			}
			return out[0], done
		}
		if ended != nil {
			t.Fatalf("ping ended before sending: %v", ended.err)
		}
	}
	t.Fatal("ping sent nothing")
	return sent{}, nil
}

func waitPing(t *testing.T, done <-chan pingResult) pingResult {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("ping still waiting")
	}
	return pingResult{}
}

func TestPingIsAnsweredByTheMatchingReply(t *testing.T) {
	for _, size := range []int{0, 56, 1452, 65000} {
		t.Run(fmt.Sprint(size), func(t *testing.T) {
			h := newHarness(t, icmpv6.Config{})
			req, done := startPing(t, h, context.Background(), farAddr, size)
			d := decode(t, req)
			if d.m.TypeCode.Type() != wire.ICMPv6EchoRequest || d.echo == nil || len(d.body) != size {
				t.Fatalf("request type %v echo %+v with %d bytes", d.m.TypeCode, d.echo, len(d.body))
			}
			if addr(d.ip.SrcIP) != ourAddr || addr(d.ip.DstIP) != farAddr {
				t.Errorf("request %v > %v", d.ip.SrcIP, d.ip.DstIP)
			}
			if req.sp.DF {
				t.Error("request forbids fragmenting: ping6 -s sends large requests in fragments")
			}
			// Replies that answer another ping, or carry other data, do
			// not end it.
			h.inject(t, echo(t, farAddr, ourAddr, wire.ICMPv6EchoReply, d.echo.Identifier+1, d.echo.SeqNumber, d.body))
			h.inject(t, echo(t, peerAddr, ourAddr, wire.ICMPv6EchoReply, d.echo.Identifier, d.echo.SeqNumber, d.body))
			if size > 0 {
				other := bytes.Clone(d.body)
				other[0] ^= 1
				h.inject(t, echo(t, farAddr, ourAddr, wire.ICMPv6EchoReply, d.echo.Identifier, d.echo.SeqNumber, other))
			}
			h.clk.Advance(7 * time.Millisecond)
			h.inject(t, echo(t, farAddr, ourAddr, wire.ICMPv6EchoReply, d.echo.Identifier, d.echo.SeqNumber, d.body))
			r := waitPing(t, done)
			if r.err != nil || r.rtt != 7*time.Millisecond {
				t.Errorf("ping = %v, %v; want 7ms", r.rtt, r.err)
			}
			corrupt := int64(0)
			if size > 0 {
				corrupt = 1
			}
			checkCounters(t, h, map[string]int64{"OutEchos": 1, "InEchoReplies": 3 + corrupt, "InEchoRepUnknown": 2, "InEchoRepCorrupt": corrupt, "PingsOutstanding": 0})
		})
	}
}

func TestPingEndsWithItsContext(t *testing.T) {
	h := newHarness(t, icmpv6.Config{})
	ctx, cancel := context.WithCancel(context.Background())
	_, done := startPing(t, h, ctx, farAddr, 8)
	cancel()
	if r := waitPing(t, done); !errors.Is(r.err, context.Canceled) {
		t.Errorf("ping = %v, want its context's end", r.err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	_, done = startPing(t, h, ctx, farAddr, 8)
	if r := waitPing(t, done); !errors.Is(r.err, context.DeadlineExceeded) {
		t.Errorf("ping = %v, want its deadline", r.err)
	}
}

func TestPingFailsOnAnErrorQuotingItsRequest(t *testing.T) {
	tests := []struct {
		name      string
		typ, code uint8
		param     uint32
		want      error
	}{
		{"no route", wire.ICMPv6DestUnreach, wire.ICMPv6CodeNoRoute, 0, syscall.ENETUNREACH},
		{"address unreachable", wire.ICMPv6DestUnreach, wire.ICMPv6CodeAddrUnreach, 0, syscall.EHOSTUNREACH},
		{"packet too big", wire.ICMPv6PacketTooBig, 0, 1280, syscall.EMSGSIZE},
		{"hop limit", wire.ICMPv6TimeExceeded, 0, 0, syscall.EHOSTUNREACH},
		{"parameter problem", wire.ICMPv6ParamProblem, 0, 0, syscall.EPROTO},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, icmpv6.Config{})
			req, done := startPing(t, h, context.Background(), farAddr, 1400)
			// An error about another ping of ours does not end this one.
			other := bytes.Clone(req.b)
			other[wire.IPv6HeaderLen+7]++
			h.inject(t, errorAbout(t, peerAddr, ourAddr, tt.typ, tt.code, tt.param, other))
			select {
			case r := <-done:
				t.Fatalf("an error about another request ended the ping: %v", r.err)
			default:
			}
			h.inject(t, errorAbout(t, peerAddr, ourAddr, tt.typ, tt.code, tt.param, req.b))
			if r := waitPing(t, done); !errors.Is(r.err, tt.want) {
				t.Errorf("ping = %v, want %v", r.err, tt.want)
			}
			checkCounters(t, h, map[string]int64{"InErrorsDelivered": 1, "InErrorsNoHandler": 1})
		})
	}
}

func TestPingFailsAtOnce(t *testing.T) {
	h := newHarness(t, icmpv6.Config{})
	ctx := context.Background()
	if _, err := h.p.Ping(ctx, farAddr, icmpv6.MaxPingSize+1); !errors.Is(err, syscall.EMSGSIZE) {
		t.Errorf("ping of %d bytes = %v, want EMSGSIZE", icmpv6.MaxPingSize+1, err)
	}
	if _, err := h.p.Ping(ctx, farAddr, -1); !errors.Is(err, syscall.EMSGSIZE) {
		t.Errorf("ping of -1 bytes = %v, want EMSGSIZE", err)
	}
	if _, err := h.p.Ping(ctx, netip.MustParseAddr("192.0.2.1"), 8); !errors.Is(err, syscall.EAFNOSUPPORT) {
		t.Errorf("ping to IPv4 = %v, want EAFNOSUPPORT", err)
	}
	h.net.setNoRoute(true)
	if _, err := h.p.Ping(ctx, farAddr, 8); !errors.Is(err, syscall.ENETUNREACH) {
		t.Errorf("ping without a route = %v, want ENETUNREACH", err)
	}
	h.net.setNoRoute(false)
	h.p.Close()
	if _, err := h.p.Ping(ctx, farAddr, 8); !errors.Is(err, net.ErrClosed) {
		t.Errorf("ping after Close = %v, want net.ErrClosed", err)
	}
	checkCounters(t, h, map[string]int64{"PingsOutstanding": 0})
}

func TestPingToOurOwnAddressIsAnsweredByOurselves(t *testing.T) {
	for _, dst := range []netip.Addr{ourAddr, ourLL.WithZone(zone), ourLL} {
		t.Run(dst.String(), func(t *testing.T) {
			h := newHarness(t, icmpv6.Config{})
			if _, err := h.p.Ping(context.Background(), dst, 100); err != nil {
				t.Fatalf("ping %v: %v", dst, err)
			}
			checkCounters(t, h, map[string]int64{"OutEchos": 1, "InEchos": 1, "OutEchoReplies": 1, "InEchoReplies": 1, "InEchoRepUnknown": 0})
		})
	}
}

func TestCloseEndsAnOutstandingPing(t *testing.T) {
	h := newHarness(t, icmpv6.Config{})
	_, done := startPing(t, h, context.Background(), farAddr, 8)
	h.p.Close()
	if r := waitPing(t, done); !errors.Is(r.err, net.ErrClosed) {
		t.Errorf("ping = %v, want net.ErrClosed", r.err)
	}
}
