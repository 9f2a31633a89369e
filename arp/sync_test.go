package arp_test

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/dealer"
	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ethernet"
	"github.com/gonetstack/gonet/link/pipe"
)

// noAddresses is a NIC with no IPv4 address.
type noAddresses struct{}

func (noAddresses) HasAddress(netip.Addr) bool              { return false }
func (noAddresses) SourceFor(netip.Addr) (netip.Addr, bool) { return netip.Addr{}, false }

func TestSyncReturnsOnceTheDealerHasHandledWhatWasDelivered(t *testing.T) {
	e := &env.Env{Clock: clock.Real{}, Rand: env.NewRand(nil), Pool: buffer.NewPool(), Budget: budget.New(1 << 20)}
	a, b := pipe.New(1500, net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2})
	defer b.Close()
	nic, err := ethernet.NewNIC("eth0", a, e.Pool)
	if err != nil {
		t.Fatal(err)
	}
	defer nic.Close()
	p := arp.New(nic, arp.Config{}, e)
	p.Start(noAddresses{}, nil)
	// Delivered straight to ARP, as the NIC's receive goroutine does:
	// packets too short for ARP, counted malformed by the dealer.
	batch := buffer.GetBatch()
	for range 3 {
		batch.Pkts = append(batch.Pkts, e.Pool.Get(8))
	}
	p.Deliver(batch)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	// Read without waiting: Sync is the only thing ordering it after the dealer.
	if got := p.Stats.InMalformed.Load(); got != 3 {
		t.Errorf("InMalformed = %d right after Sync, want 3", got)
	}
	p.Close()
	if err := p.Sync(context.Background()); !errors.Is(err, dealer.ErrClosed) {
		t.Errorf("Sync after Close = %v, want dealer.ErrClosed", err)
	}
	if n := e.Pool.Outstanding(); n != 0 {
		t.Errorf("%d packets not released", n)
	}
}
