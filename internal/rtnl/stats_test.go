package rtnl_test

import (
	"context"
	"encoding/json"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/rtnl"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
)

// A Conn opened in a test namespace reads that namespace's interfaces from
// any thread, with the figures ip -s link gives.
func TestLinkStatsReadsTheNamespaceTheConnWasOpenedIn(t *testing.T) {
	netnstest.RequireTool(t, "ping")
	ns := netnstest.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	// A device this namespace alone has, and traffic on its loopback.
	for _, args := range [][]string{{"link", "add", "only0", "type", "veth", "peer", "name", "only1"}, {"link", "set", "lo", "up"}} {
		if out, err := ns.IP(ctx, args...); err != nil {
			t.Fatalf("ip %v: %v: %s", args, err, out)
		}
	}
	if out, err := ns.Run(ctx, "ping", "-c", "3", "-i", "0.01", "-q", "127.0.0.1"); err != nil {
		t.Fatalf("ping: %v: %s", err, out)
	}
	var conn *rtnl.Conn
	if err := ns.Do(func() (err error) { conn, err = rtnl.Dial(); return err }); err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	got, err := conn.LinkStats("lo")
	if err != nil {
		t.Fatal(err)
	}
	if got.RxPackets < 6 || got.RxPackets != got.TxPackets || got.RxBytes != got.TxBytes {
		t.Errorf("lo after 3 pings: %+v, want at least 6 packets, as many in as out", got)
	}
	out, err := ns.IP(ctx, "-s", "-j", "link", "show", "dev", "lo")
	if err != nil {
		t.Fatalf("ip -s -j link: %v: %s", err, out)
	}
	var ip []struct {
		Stats64 struct {
			Rx, Tx struct{ Bytes, Packets, Errors, Dropped uint64 }
		} `json:"stats64"`
	}
	if err := json.Unmarshal(out, &ip); err != nil || len(ip) != 1 {
		t.Fatalf("ip -s -j link: %v in %s", err, out)
	}
	s := ip[0].Stats64
	want := rtnl.LinkStats{
		RxPackets: s.Rx.Packets, TxPackets: s.Tx.Packets, RxBytes: s.Rx.Bytes, TxBytes: s.Tx.Bytes,
		RxErrors: s.Rx.Errors, TxErrors: s.Tx.Errors, RxDropped: s.Rx.Dropped, TxDropped: s.Tx.Dropped,
	}
	if got != want {
		t.Errorf("LinkStats(lo) = %+v, ip -s link says %+v", got, want)
	}

	if _, err := conn.LinkStats("only0"); err != nil {
		t.Errorf("the namespace's own device, read from outside it: %v", err)
	}
	if _, err := conn.LinkStats("no-such0"); !errors.Is(err, syscall.ENODEV) {
		t.Errorf("LinkStats of a missing device = %v, want ENODEV", err)
	}
	conn.Close()
	if _, err := conn.LinkStats("lo"); err == nil {
		t.Error("LinkStats on a closed Conn: no error")
	}
}
