package arp_test

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ethernet"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/wire"
)

// oneAddress is a NIC holding one IPv4 address.
type oneAddress struct{ a netip.Addr }

func (o oneAddress) HasAddress(a netip.Addr) bool { return a == o.a }
func (o oneAddress) SourceFor(netip.Addr) (netip.Addr, bool) {
	return o.a, true
}

// FuzzDealer hands the ARP dealer arbitrary packets while it probes for
// one address, defends another and verifies a third, defended too, as
// when the link comes up (RFC 5227), with senders and targets
// drawn from the addresses that matter to it: it must never panic, and
// must release every packet.
func FuzzDealer(f *testing.F) {
	ours := netip.MustParseAddr("10.5.0.2")
	probed := netip.MustParseAddr("10.5.0.50")
	verified := netip.MustParseAddr("10.5.0.51")
	addrs := []netip.Addr{ours, probed, netip.IPv4Unspecified(), netip.MustParseAddr("10.5.0.9"), netip.MustParseAddr("255.255.255.255"), verified}
	macs := []wire.MAC{{2, 0, 0, 0, 0, 9}, {2, 0, 0, 0, 0, 1}, {1, 0, 0x5e, 0, 0, 1}, {}}
	f.Add([]byte{}, uint8(0), uint8(0))
	f.Add(make([]byte, wire.ARPLen), uint8(1), uint8(0x12))
	f.Add(make([]byte, wire.ARPLen+18), uint8(2), uint8(0x21))
	f.Add([]byte{0, 1, 8, 0, 6, 4, 0, 3}, uint8(0), uint8(0x33))

	e := &env.Env{Clock: clock.NewVirtual(time.Unix(0, 0)), Rand: env.NewRand(nil), Pool: buffer.NewPool(), Budget: budget.New(1 << 20)}
	a, b := pipe.New(1500, net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2})
	f.Cleanup(func() { b.Close() })
	nic, err := ethernet.NewNIC("eth0", a, e.Pool)
	if err != nil {
		f.Fatal(err)
	}
	p := arp.New(nic, arp.Config{}, e)
	p.Start(oneAddress{ours}, nil)
	nic.Start()
	f.Cleanup(func() {
		p.Close()
		nic.Close()
		if n := e.Pool.Outstanding(); n != 0 {
			f.Errorf("%d packets not released", n)
		}
	})
	p.AnnounceAndDefend(ours, arp.Keep, nil)
	p.AnnounceAndDefend(verified, arp.DefendOnce, nil)
	ctx, cancel := context.WithCancel(context.Background())
	probing, verifying := make(chan error, 1), make(chan error, 1)
	go func() { probing <- p.Probe(ctx, probed) }()
	go func() { verifying <- p.Verify(ctx, verified) }()
	f.Cleanup(func() { cancel(); <-probing; <-verifying })

	f.Fuzz(func(t *testing.T, body []byte, op uint8, who uint8) {
		if len(body) > 100 {
			return
		}
		pk := e.Pool.Get(max(len(body), wire.ARPLen))
		bs := pk.Bytes()
		copy(bs, body)
		if len(body) < wire.ARPLen {
			// Short input: a well-formed packet of the chosen fields,
			// so that the dealer's logic past the parser is reached.
			wire.EncodeARP(bs, &wire.ARPFields{
				Op:        uint16(op%3) + 1,
				SenderMAC: macs[int(who)%len(macs)], SenderIP: addrs[int(who>>2)%len(addrs)],
				TargetIP: addrs[int(who>>5)%len(addrs)],
			})
		}
		batch := buffer.GetBatch()
		batch.Pkts = append(batch.Pkts, pk)
		p.Deliver(batch)
		if err := p.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}
