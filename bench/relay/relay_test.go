package relay

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/stream"
)

// The kernel behind the relay's TAP device resolves a peer on the stream
// side with ARP, hears the answer that crossed the relay the other way, and
// then sends that peer its datagram: frames cross both ways, whole.
func TestFramesCrossTheRelayBothWays(t *testing.T) {
	ns := netnstest.New(t)
	sock := filepath.Join(t.TempDir(), "qemu.sock")
	peer, err := stream.Listen(sock, stream.Options{MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	dev := netns.DeviceName()
	var r *Relay
	if err := ns.Do(func() (err error) { r, err = Open(dev, sock, 1500); return err }); err != nil {
		t.Fatal(err)
	}
	ran := make(chan error, 1)
	go func() { ran <- r.Run() }()
	defer func() {
		r.Close()
		if err := <-ran; err != nil {
			t.Errorf("Run after Close: %v", err)
		}
	}()
	if err := ns.ConfigureLink(dev, netip.MustParsePrefix("10.99.0.1/24"), 1500); err != nil {
		t.Fatal(err)
	}
	// The kernel starts with ARP for 10.99.0.2 once something is sent there.
	go ns.Do(func() error {
		c, err := net.Dial("udp4", "10.99.0.2:9")
		if err == nil {
			c.Write([]byte("through the relay"))
			c.Close()
		}
		return err
	})

	pool := buffer.NewPool()
	read := func(etherType uint16) []byte {
		t.Helper()
		pkts := []*buffer.Packet{pool.Get(link.MaxFrame(1500))}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			pkts[0].Reset()
			pkts[0].SetLen(link.MaxFrame(1500))
			n, err := peer.ReadBatch(pkts)
			if err != nil {
				t.Fatal(err)
			}
			if f := pkts[0].Bytes(); n == 1 && len(f) >= 14 && binary.BigEndian.Uint16(f[12:]) == etherType {
				return bytes.Clone(f)
			}
		}
		t.Fatalf("no frame of type %#04x crossed the relay", etherType)
		return nil
	}
	req := read(0x0806)
	if got := netip.AddrFrom4([4]byte(req[14+24 : 14+28])); got != netip.MustParseAddr("10.99.0.2") {
		t.Fatalf("ARP request for %v, want 10.99.0.2", got)
	}

	// Answer it from a made-up MAC on the stream side.
	mac := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x02}
	reply := make([]byte, 14+28)
	copy(reply[0:6], req[6:12])
	copy(reply[6:12], mac)
	binary.BigEndian.PutUint16(reply[12:], 0x0806)
	arp := reply[14:]
	binary.BigEndian.PutUint16(arp[0:], 1)      // Ethernet
	binary.BigEndian.PutUint16(arp[2:], 0x0800) // IPv4
	arp[4], arp[5] = 6, 4
	binary.BigEndian.PutUint16(arp[6:], 2) // reply
	copy(arp[8:14], mac)
	copy(arp[14:18], req[14+24:14+28])
	copy(arp[18:24], req[14+8:14+14])
	copy(arp[24:28], req[14+14:14+18])
	out := pool.Get(len(reply))
	copy(out.Bytes(), reply)
	if _, err := peer.WriteBatch([]*buffer.Packet{out}); err != nil {
		t.Fatal(err)
	}

	ip := read(0x0800)
	if !bytes.Equal(ip[0:6], mac) || !bytes.Contains(ip, []byte("through the relay")) {
		t.Fatalf("the datagram's frame %x: want it sent to %v with its payload", ip, mac)
	}
}
