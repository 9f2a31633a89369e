package stack_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"

	"github.com/gonetstack/gonet/dealer"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
)

func TestSyncCoversWhatTheHostSentItself(t *testing.T) {
	a, _ := pair(t, 1500)
	cli, err := a.ListenUDP(netip.AddrPort{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// To our own address: queued for the IPv4 dealer before WriteTo returns.
	for range 3 {
		if _, err := cli.WriteToUDPAddrPort([]byte("hello"), netip.AddrPortFrom(addrA.Addr(), 4444)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Sync(context.Background()); err != nil {
		t.Fatalf("Sync: %v", err)
	}
	// No polling: once Sync returns the dealer has handed each datagram to UDP.
	if got := a.Counters()["UDP.NoPorts"]; got != 3 {
		t.Errorf("UDP.NoPorts = %d right after Sync, want 3", got)
	}
	stacktest.Closed(t, a)
	if err := a.Sync(context.Background()); !errors.Is(err, dealer.ErrClosed) {
		t.Errorf("Sync after Close = %v, want dealer.ErrClosed", err)
	}
}

func TestSyncEndsWithTheContext(t *testing.T) {
	a, _ := pair(t, 1500)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.Sync(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Sync with a cancelled context = %v, want context.Canceled", err)
	}
}
