package integration

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
)

// `gonet up` answers multicast DNS for its name with no flag asking for
// it: a legacy resolver on the kernel (RFC 6762 section 6.7: a query from
// a port other than 5353, answered unicast) asks 224.0.0.251 and ff02::fb
// for gonet-<the MAC's last three bytes>.local and gets GoNet's addresses
// of each family. (dig would not do: it takes no answer from an address
// other than the one it asked.)
func TestDaemonAnswersMDNSForItsName(t *testing.T) {
	bin := buildGonet(t)
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	d := startDaemon(t, ctx, ns, "gonet: up "+dev, bin, "up", "-tap", dev, "-addr", daemon4GoNet.String(), "-addr", daemon6GoNet.String(), "-control", "none")
	f := strings.Fields(d.lines.Text())
	if len(f) < 5 {
		t.Fatalf("ready line %q", d.lines.Text())
	}
	mac, err := net.ParseMAC(f[4])
	if err != nil {
		t.Fatalf("ready line %q: %v", d.lines.Text(), err)
	}
	go func() {
		for d.lines.Scan() {
		}
	}()
	name := mdnsName(mac)
	if err := ns.ConfigureLink(dev, daemon4Kernel, 1500); err != nil {
		t.Fatal(err)
	}
	addKernelIPv6(t, ns, dev, daemon6Kernel)
	// The kernel sends to the group out of the TAP.
	if _, err := ns.IP(ctx, "route", "add", "224.0.0.0/4", "dev", dev); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		network, group string
		qtype          uint16
		want           string
	}{
		{"udp4", "224.0.0.251:5353", mdns.TypeA, daemon4GoNet.Addr().String()},
		{"udp6", "[ff02::fb%" + dev + "]:5353", mdns.TypeAAAA, daemon6GoNet.Addr().String()},
	} {
		waitFor(t, "GoNet's answer over "+c.network, 10*time.Second, func() bool {
			return slices.Contains(askMDNS(t, ns, c.network, c.group, name, c.qtype), c.want)
		})
	}
}

// mdnsName is the name gonet up answers for by default: gonet- and the
// last three bytes of its MAC, under .local.
func mdnsName(mac net.HardwareAddr) string {
	return fmt.Sprintf("gonet-%02x%02x%02x.local", mac[3], mac[4], mac[5])
}

// askMDNS asks the mDNS group (224.0.0.251:5353, or [ff02::fb%dev]:5353
// over "udp6") for name's records of qtype from a kernel socket in ns, as a
// legacy resolver (RFC 6762 section 6.7), and returns the addresses of the
// answer that comes within a second, none if none does.
func askMDNS(t *testing.T, ns *netns.NS, network, group, name string, qtype uint16) []string {
	t.Helper()
	var got []string
	if m := askMDNSMsg(t, ns, network, group, name, qtype); m != nil {
		for _, rr := range m.Answer {
			switch v := rr.(type) {
			case *mdns.A:
				got = append(got, v.A.String())
			case *mdns.AAAA:
				got = append(got, v.AAAA.String())
			}
		}
	}
	return got
}

// askMDNSMsg is askMDNS's question, returning the whole answer, nil if
// none comes within a second.
func askMDNSMsg(t *testing.T, ns *netns.NS, network, group, name string, qtype uint16) *mdns.Msg {
	t.Helper()
	q := new(mdns.Msg)
	q.SetQuestion(name+".", qtype)
	raw, err := q.Pack()
	if err != nil {
		t.Fatal(err)
	}
	var m *mdns.Msg
	err = ns.Do(func() error {
		pc, err := net.ListenPacket(network, ":0")
		if err != nil {
			return err
		}
		defer pc.Close()
		to, err := net.ResolveUDPAddr(network, group)
		if err != nil {
			return err
		}
		if _, err := pc.WriteTo(raw, to); err != nil {
			return err
		}
		pc.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 1500)
		n, _, err := pc.ReadFrom(buf)
		if err != nil {
			return nil // no answer
		}
		m = new(mdns.Msg)
		return m.Unpack(buf[:n])
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// A host on the kernel's side that starts answering for `gonet up`'s name
// after GoNet claimed it makes GoNet probe again (RFC 6762 section 9), find
// the name taken, and move to the next one, -2 (section 8.1), which it
// then answers for.
func TestDaemonMovesOffAnMDNSNameAnotherHostTakes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ns, dev := upForMDNS(t, ctx, "-hostname", "taken")
	gonet := daemon4GoNet.Addr().String()
	waitFor(t, "GoNet's answer for taken.local", 10*time.Second, func() bool {
		return slices.Contains(askMDNS(t, ns, "udp4", "224.0.0.251:5353", "taken.local", mdns.TypeA), gonet)
	})
	// The other host: a kernel socket on the group that announces
	// taken.local with an address of its own and answers every query
	// for it, GoNet's probes among them.
	var holder *net.UDPConn
	err := ns.Do(func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		holder, err = net.ListenMulticastUDP("udp4", ifi, &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	group := &net.UDPAddr{IP: net.IPv4(224, 0, 0, 251), Port: 5353}
	claim := new(mdns.Msg)
	claim.Response, claim.Authoritative = true, true
	claim.Answer = []mdns.RR{&mdns.A{Hdr: mdns.RR_Header{Name: "taken.local.", Rrtype: mdns.TypeA, Class: mdns.ClassINET | 1<<15, Ttl: 120}, A: net.IPv4(10, 99, 6, 77)}}
	out, err := claim.Pack()
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		buf := make([]byte, 9000)
		for {
			n, _, err := holder.ReadFromUDP(buf)
			if err != nil {
				return
			}
			var q mdns.Msg
			if q.Unpack(buf[:n]) != nil || q.Response {
				continue
			}
			if slices.ContainsFunc(q.Question, func(qu mdns.Question) bool { return strings.EqualFold(qu.Name, "taken.local.") }) {
				holder.WriteToUDP(out, group)
			}
		}
	}()
	if _, err := holder.WriteToUDP(out, group); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "GoNet's answer for taken-2.local", 10*time.Second, func() bool {
		return slices.Contains(askMDNS(t, ns, "udp4", "224.0.0.251:5353", "taken-2.local", mdns.TypeA), gonet)
	})
}

// gonet up -serve http advertises the service (DNS-SD, RFC 6763): a
// kernel-side browser asking for _http._tcp.local gets the instance, under
// the host's name, and with it the SRV record of port 80 on the host.
func TestDaemonAdvertisesItsHTTPService(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	ns, _ := upForMDNS(t, ctx, "-hostname", "sdhost", "-serve", "http")
	var m *mdns.Msg
	waitFor(t, "GoNet's answer for _http._tcp.local", 10*time.Second, func() bool {
		m = askMDNSMsg(t, ns, "udp4", "224.0.0.251:5353", "_http._tcp.local", mdns.TypePTR)
		return m != nil && len(m.Answer) > 0
	})
	ptr, ok := m.Answer[0].(*mdns.PTR)
	if !ok || ptr.Ptr != "sdhost._http._tcp.local." {
		t.Fatalf("answer %v, want the PTR to sdhost._http._tcp.local.", m.Answer)
	}
	found := false
	for _, rr := range m.Extra {
		if srv, ok := rr.(*mdns.SRV); ok && srv.Port == 80 && srv.Target == "sdhost.local." {
			found = true
		}
	}
	if !found {
		t.Fatalf("additional records %v, want the SRV of port 80 on sdhost.local.", m.Extra)
	}
}

// upForMDNS starts gonet up with args on a TAP in a namespace of its own,
// IPv4 only, the kernel's side configured and sending to multicast groups
// out of the TAP, and returns the namespace and the device.
func upForMDNS(t *testing.T, ctx context.Context, args ...string) (*netns.NS, string) {
	t.Helper()
	bin := buildGonet(t)
	ns := netnstest.New(t)
	dev := netns.DeviceName()
	up := append([]string{"up", "-tap", dev, "-addr", daemon4GoNet.String(), "-no-ipv6", "-control", "none"}, args...)
	d := startDaemon(t, ctx, ns, "gonet: up "+dev, bin, up...)
	go func() {
		for d.lines.Scan() {
		}
	}()
	if err := ns.ConfigureLink(dev, daemon4Kernel, 1500); err != nil {
		t.Fatal(err)
	}
	if _, err := ns.IP(ctx, "route", "add", "224.0.0.0/4", "dev", dev); err != nil {
		t.Fatal(err)
	}
	return ns, dev
}
