package integration

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"

	"github.com/gonetstack/gonet/arp"
	"github.com/gonetstack/gonet/dhcp"
	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

// GoNet's DHCP client beside the kernel's ISC dhclient, the comparison
// issue 15 asks for: both on one bridged link, their messages captured
// by tcpdump on the bridge, in two parts run in parallel, some 30 s in
// all. The times are the RFC's: retransmission (RFC 2131 section 4.1)
// with no server, then renewal at T1 and rebinding at T2 (section 4.4.5)
// with a server that gave the lease and went. dnsmasq's two-minute lease
// minimum would make T1 a minute; it sends the T1 and T2 it is told,
// 6 and 12 s, which both clients take as the RFC says they must.

// The dhclient's MAC and GoNet's, to tell their messages apart.
var (
	dhclientMAC = net.HardwareAddr{0x02, 0x00, 0x5e, 0x15, 0x00, 0x01}
	gonetMAC    = net.HardwareAddr{0x02, 0x00, 0x5e, 0x15, 0x00, 0x02}
)

// dhclientConf sets the two timers of dhclient's backoff that the
// defaults of its versions disagree on (its manual says ten seconds
// where 4.4's code has three): the first wait at RFC 2131's 4 s, the
// cutoff past the test's window. Its growth from there is its own.
const dhclientConf = "initial-interval 4;\nbackoff-cutoff 64;\ntimeout 300;\n"

// dhclientRenewConf keeps dhclient's waits between renewals at 4 to 12 s
// (past the cutoff it draws from half the cutoff to one and a half
// times it), so that its first REQUEST past T2, the one that rebinds,
// comes within 12 s of T2. With dhclientConf's cutoff the waits grow
// from 4-11 s to 4-33 s over the renewals, and a CI run once waited
// more than 20 s past GoNet's rebinding for it.
const dhclientRenewConf = "initial-interval 4;\nbackoff-cutoff 8;\ntimeout 300;\n"

// dhclientScript does what dhclient-script does that the test needs,
// and nothing else (the stock one rewrites /etc/resolv.conf, which is the
// machine's): the leased address on the interface, so that a renewal can
// be unicast from it, and a line per event in the file $1.
const dhclientScript = `#!/bin/sh
echo "$reason $new_ip_address" >> "$(dirname "$0")/events"
case "$reason" in
BOUND|RENEW|REBIND|REBOOT) ip addr replace "$new_ip_address/$new_subnet_mask" dev "$interface" ;;
esac
exit 0
`

// sideBySide is a bridge in a namespace with dnsmasq's address, GoNet on
// a TAP and dhclient on a veth from a second namespace as its ports, and
// tcpdump capturing DHCP on it.
type sideBySide struct {
	ns, cns *netns.NS // the bridge's, dhclient's
	br      string
	veth    string // dhclient's end, in cns
	stack   *stack.Stack
	tap     string
	dir     string // dhclient's files
	capture string
	stopCap func()
}

func newSideBySide(t *testing.T) *sideBySide {
	t.Helper()
	for _, tool := range []string{"dnsmasq", "dhclient", "tcpdump"} {
		netnstest.RequireTool(t, tool)
	}
	l := &sideBySide{ns: netnstest.New(t), cns: netnstest.New(t), br: netns.DeviceName(), tap: netns.DeviceName(), dir: t.TempDir()}
	ctx := context.Background()
	var ep *tap.Endpoint
	if err := l.ns.Do(func() (err error) {
		ep, err = tap.Open(l.tap, tap.Options{MTU: 1500, MAC: gonetMAC})
		return err
	}); err != nil {
		t.Fatalf("open TAP in %s: %v", l.ns, err)
	}
	peer := netns.DeviceName()
	l.veth = netns.DeviceName()
	for _, args := range [][]string{
		// No STP: a port forwards at once, not after 30 s of
		// listening and learning.
		{"link", "add", l.br, "type", "bridge", "stp_state", "0", "forward_delay", "0"},
		{"link", "set", l.tap, "master", l.br, "up"},
	} {
		if _, err := l.ns.IP(ctx, args...); err != nil {
			ep.Close()
			t.Fatal(err)
		}
	}
	if err := l.ns.AddVeth(peer, l.cns, l.veth); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	if _, err := l.ns.IP(ctx, "link", "set", peer, "master", l.br, "up"); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	if _, err := l.cns.IP(ctx, "link", "set", l.veth, "address", dhclientMAC.String(), "up"); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	if err := l.ns.ConfigureLink(l.br, kernelAddr, 0); err != nil {
		ep.Close()
		t.Fatal(err)
	}
	fast := arp.ACDConfig{ProbeWait: 50 * time.Millisecond, ProbeMin: 50 * time.Millisecond, ProbeMax: 100 * time.Millisecond,
		AnnounceWait: 50 * time.Millisecond, AnnounceInterval: 50 * time.Millisecond}
	l.stack = stack.New(stack.Config{NoIPv6: true, ARP: arp.Config{ACD: fast}})
	t.Cleanup(func() { stacktest.Closed(t, l.stack) })
	if err := l.stack.AddNIC(l.tap, ep); err != nil {
		t.Fatal(err)
	}
	l.startCapture(t)
	return l
}

// startCapture runs tcpdump on the bridge, writing DHCP's datagrams to
// l.capture, and returns once it listens.
func (l *sideBySide) startCapture(t *testing.T) {
	t.Helper()
	l.capture = filepath.Join(t.TempDir(), "dhcp.pcap")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := l.ns.Command(ctx, "tcpdump", "-i", l.br, "-n", "-U", "-w", l.capture, "udp port 67 or udp port 68")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start tcpdump: %v", err)
	}
	listening := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "listening on") {
				close(listening)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	done := false
	l.stopCap = func() {
		if done {
			return
		}
		done = true
		// SIGTERM: tcpdump flushes the file and exits.
		cmd.Process.Signal(syscall.SIGTERM)
		waited := make(chan struct{})
		go func() { cmd.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(5 * time.Second):
			cancel()
			<-waited
		}
		cancel()
	}
	t.Cleanup(l.stopCap)
	select {
	case <-listening:
	case <-time.After(10 * time.Second):
		t.Fatal("tcpdump did not start listening in 10 s")
	}
}

// startDhclient runs ISC dhclient in the foreground on its veth, with the
// given configuration and the test's script, until the test ends.
func (l *sideBySide) startDhclient(t *testing.T, config string) {
	t.Helper()
	conf := filepath.Join(l.dir, "dhclient.conf")
	script := filepath.Join(l.dir, "script")
	if err := os.WriteFile(conf, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte(dhclientScript), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var out strings.Builder
	cmd := l.cns.Command(ctx, "dhclient", "-4", "-d", "-v", "-cf", conf, "-sf", script,
		"-lf", filepath.Join(l.dir, "leases"), "-pf", filepath.Join(l.dir, "pid"), l.veth)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start dhclient: %v", err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		if t.Failed() {
			t.Logf("dhclient:\n%s", out.String())
		}
	})
}

// dhclientBound reports whether dhclient's script has run for a lease.
func (l *sideBySide) dhclientBound() bool {
	b, _ := os.ReadFile(filepath.Join(l.dir, "events"))
	return strings.Contains(string(b), "BOUND ")
}

// wireDHCP is a DHCP message as the capture has it.
type wireDHCP struct {
	at     time.Time
	typ    layers.DHCPMsgType
	chaddr string
	xid    uint32
	secs   uint16
	dst    netip.Addr
	ciaddr netip.Addr
	yiaddr netip.Addr    // an ACK's
	t1, t2 time.Duration // an ACK's options 58 and 59; zero when absent
}

func (m wireDHCP) String() string {
	return fmt.Sprintf("%s %v xid %#x secs %d to %v ciaddr %v", m.at.Format("15:04:05.000"), m.typ, m.xid, m.secs, m.dst, m.ciaddr)
}

// messages stops the capture and returns its DHCP messages, in order.
func (l *sideBySide) messages(t *testing.T) []wireDHCP {
	t.Helper()
	l.stopCap()
	list, err := l.read()
	if err != nil {
		t.Fatalf("reading tcpdump's capture: %v", err)
	}
	return list
}

// read returns the DHCP messages captured so far, in order: those
// tcpdump has written whole.
func (l *sideBySide) read() ([]wireDHCP, error) {
	f, err := os.Open(l.capture)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return nil, err
	}
	var list []wireDHCP
	for {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		d, ok := p.Layer(layers.LayerTypeDHCPv4).(*layers.DHCPv4)
		ip, ok4 := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		if !ok || !ok4 {
			continue
		}
		m := wireDHCP{at: ci.Timestamp, chaddr: d.ClientHWAddr.String(), xid: d.Xid, secs: d.Secs}
		m.dst, _ = netip.AddrFromSlice(ip.DstIP.To4())
		m.ciaddr, _ = netip.AddrFromSlice(d.ClientIP.To4())
		m.yiaddr, _ = netip.AddrFromSlice(d.YourClientIP.To4())
		for _, o := range d.Options {
			switch {
			case o.Type == layers.DHCPOptMessageType && len(o.Data) == 1:
				m.typ = layers.DHCPMsgType(o.Data[0])
			case o.Type == layers.DHCPOptT1 && len(o.Data) == 4:
				m.t1 = seconds(o.Data)
			case o.Type == layers.DHCPOptT2 && len(o.Data) == 4:
				m.t2 = seconds(o.Data)
			}
		}
		list = append(list, m)
	}
	return list, nil
}

// seen returns a condition for waitFor: the capture holds n messages
// that match.
func (l *sideBySide) seen(n int, match func(wireDHCP) bool) func() bool {
	return func() bool {
		list, _ := l.read()
		k := 0
		for _, m := range list {
			if match(m) {
				k++
			}
		}
		return k >= n
	}
}

// rebinding matches a client's REQUESTs in REBINDING: broadcast, from
// the address it holds (RFC 2131 table 5).
func rebinding(mac net.HardwareAddr) func(wireDHCP) bool {
	return func(m wireDHCP) bool {
		return m.chaddr == mac.String() && m.typ == layers.DHCPMsgTypeRequest &&
			m.dst == netip.AddrFrom4([4]byte{255, 255, 255, 255}) && m.ciaddr.IsValid() && !m.ciaddr.IsUnspecified()
	}
}

func seconds(b []byte) time.Duration {
	return time.Duration(uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3])) * time.Second
}

// of returns the messages of type typ for the client with MAC mac.
func of(list []wireDHCP, mac net.HardwareAddr, typ layers.DHCPMsgType) []wireDHCP {
	var out []wireDHCP
	for _, m := range list {
		if m.chaddr == mac.String() && m.typ == typ {
			out = append(out, m)
		}
	}
	return out
}

// gaps returns the times between successive messages.
func gaps(list []wireDHCP) []time.Duration {
	var g []time.Duration
	for i := 1; i < len(list); i++ {
		g = append(g, list[i].at.Sub(list[i-1].at))
	}
	return g
}

// slack is what the capture adds to a client's own timing: the frame's
// way to the bridge and tcpdump's timestamp, with room for a loaded
// machine.
const slack = 300 * time.Millisecond

func TestDHCPTimingsBesideDhclient(t *testing.T) {
	if testing.Short() {
		t.Skip("30 s of DHCP timers (-short)")
	}
	// RFC 2131 section 4.1: "the client SHOULD ... wait 4 seconds
	// before the second retransmission ... doubled on subsequent
	// retransmissions ... randomized by the value of a uniform random
	// number chosen from the range -1 to +1". GoNet does exactly that.
	// dhclient (4.4) adds to its wait a random share of up to twice
	// itself at each DISCOVER, the first included: doubling on average,
	// the RFC's intent with a wider spread, its first wait 4 to 12 s
	// where the RFC's is 3 to 5, and often only two DISCOVERs in the
	// time GoNet sends four. Both keep the xid (section 4.4.1: the xid
	// matches the replies to the exchange) and count secs from the
	// first DISCOVER (section 2: "seconds elapsed since client began
	// address acquisition").
	t.Run("DISCOVER retransmission backoff with no server", func(t *testing.T) {
		t.Parallel()
		l := newSideBySide(t)
		l.startDhclient(t, dhclientConf)
		c, err := dhcp.StartOn(context.Background(), l.stack, l.tap, dhcp.ClientConfig{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// The fourth DISCOVER goes at 4+8+16 s ± 3 s.
		waitFor(t, "GoNet's fourth DISCOVER on the wire", 35*time.Second, l.seen(4, func(m wireDHCP) bool {
			return m.chaddr == gonetMAC.String() && m.typ == layers.DHCPMsgTypeDiscover
		}))
		list := l.messages(t)
		for _, who := range []struct {
			name string
			mac  net.HardwareAddr
			min  int
		}{{"GoNet", gonetMAC, 4}, {"dhclient", dhclientMAC, 2}} {
			d := of(list, who.mac, layers.DHCPMsgTypeDiscover)
			t.Logf("%s's DISCOVERs: %v, gaps %v", who.name, d, gaps(d))
			if len(d) < who.min {
				t.Errorf("%s sent %d DISCOVERs, want at least %d", who.name, len(d), who.min)
				continue
			}
			for i, m := range d {
				if m.xid != d[0].xid {
					t.Errorf("%s's DISCOVER %d has xid %#x, the first %#x: a retransmission keeps it", who.name, i+1, m.xid, d[0].xid)
				}
				// secs is whole seconds, of the client's clock.
				if elapsed, secs := m.at.Sub(d[0].at), time.Duration(m.secs)*time.Second; secs-elapsed > time.Second+slack || elapsed-secs > time.Second+slack {
					t.Errorf("%s's DISCOVER %d says secs %d, %v after the first", who.name, i+1, m.secs, elapsed.Round(time.Millisecond))
				}
			}
		}
		g := gaps(of(list, gonetMAC, layers.DHCPMsgTypeDiscover))
		for i, want := range []time.Duration{4 * time.Second, 8 * time.Second, 16 * time.Second} {
			if i < len(g) && (g[i] < want-time.Second-slack || g[i] > want+time.Second+slack) {
				t.Errorf("GoNet's wait before retransmission %d: %v, want %v ± 1 s (RFC 2131 section 4.1)", i+1, g[i].Round(time.Millisecond), want)
			}
		}
		// dhclient's first wait is initial-interval and up to twice
		// more, each later one the last and up to twice more, each
		// with the sub-second fuzz it puts on every timer.
		dg := gaps(of(list, dhclientMAC, layers.DHCPMsgTypeDiscover))
		for i, gap := range dg {
			lo, hi := 4*time.Second-time.Second-slack, 3*4*time.Second+time.Second+slack
			if i > 0 {
				lo, hi = dg[i-1]-2*time.Second-slack, 3*dg[i-1]+4*time.Second+slack
			}
			if gap < lo || gap > hi {
				t.Errorf("dhclient's wait before retransmission %d: %v, want %v to %v: dhclient no longer backs off as the comparison assumes", i+1, gap.Round(time.Millisecond), lo, hi)
			}
		}
	})

	// Section 4.4.5: T1 and T2 are the server's (options 58 and 59),
	// counted from the lease's start; at T1 the client unicasts a
	// REQUEST to its server with ciaddr set, at T2 it broadcasts one.
	// dhclient draws its renewal from 3/4 of T1 to T1 (section 4.4.5:
	// "SHOULD be chosen with some random 'fuzz'"); GoNet takes T1 as
	// the server sent it, since dnsmasq, as the RFC's servers, already
	// subtracts a random share from the T1 and T2 it computes, and a
	// client's fuzz below a configured T1 would renew earlier than the
	// administrator asked. Between T1 and T2 dhclient retransmits on its
	// backoff, and broadcasts at the first past T2; GoNet waits half the
	// time left to T2, "down to a minimum of 60 seconds" (4.4.5), so
	// none in 6 s, and broadcasts at T2 itself ("If no DHCPACK arrives
	// before time T2, the client moves to REBINDING state and sends (via
	// broadcast) a DHCPREQUEST"). Both count secs on from
	// T1 in REBINDING, the renewal process going on (section 2).
	t.Run("renewal at T1 and rebinding at T2 when the server goes", func(t *testing.T) {
		t.Parallel()
		l := newSideBySide(t)
		t1, t2 := 6*time.Second, 12*time.Second
		_, stop := startDHCPServerStoppable(t, l.ns, l.br,
			fmt.Sprintf("--dhcp-option=option:T1,%d", int(t1.Seconds())), fmt.Sprintf("--dhcp-option=option:T2,%d", int(t2.Seconds())))
		// A DISCOVER before dnsmasq listens waits 4 s for its
		// retransmission.
		waitFor(t, "dnsmasq on port 67", 10*time.Second, func() bool {
			out, _ := l.ns.Run(context.Background(), "ss", "-lun")
			return strings.Contains(string(out), ":67 ")
		})
		events := make(chan dhcp.Event, 8)
		c, err := dhcp.StartOn(context.Background(), l.stack, l.tap, dhcp.ClientConfig{
			Notify: func(e dhcp.Event) {
				select {
				case events <- e:
				default:
				}
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		// dhclient once GoNet has its lease, dnsmasq surely up by
		// then: both bind within a second, before either's T1.
		lease := waitEvent(t, events, dhcp.LeaseBound, 20*time.Second).Lease
		if lease.T1 != t1 || lease.T2 != t2 {
			t.Fatalf("GoNet's lease has T1 %v and T2 %v, want dnsmasq's %v and %v", lease.T1, lease.T2, t1, t2)
		}
		l.startDhclient(t, dhclientRenewConf)
		waitFor(t, "dhclient's lease", 20*time.Second, l.dhclientBound)
		dhclientBound := time.Now()
		// The server goes: the renewals go unanswered.
		stop()
		waitFor(t, "GoNet's rebinding", t2+5*time.Second, l.seen(1, rebinding(gonetMAC)))
		// dhclient's comes at its first retransmission past T2, up to
		// 12 s after it with dhclientRenewConf.
		waitFor(t, "dhclient's rebinding", time.Until(dhclientBound.Add(t2+12*time.Second+3*time.Second)), l.seen(1, rebinding(dhclientMAC)))
		list := l.messages(t)
		for _, who := range []struct {
			name           string
			mac            net.HardwareAddr
			renewLo, renew time.Duration // when the first renewal may go
		}{
			{"GoNet", gonetMAC, t1, t1},
			// dhclient spreads its renewal over T1's last quarter
			// and the quarter after: (3·T1+3)/4 + (random mod T1 +
			// 3)/4 whole seconds from a clock of whole seconds (its
			// dhclient.c), up to 7 s of a 6 s T1 (seen: 7.85 s).
			{"dhclient", dhclientMAC, t1 * 3 / 4, t1 + t1/4},
		} {
			acks := of(list, who.mac, layers.DHCPMsgTypeAck)
			if len(acks) != 1 {
				t.Errorf("%d ACKs to %s, want 1, before the server went: %v", len(acks), who.name, acks)
				continue
			}
			ack := acks[0]
			if ack.t1 != t1 || ack.t2 != t2 {
				t.Fatalf("dnsmasq's ACK to %s has T1 %v and T2 %v, want %v and %v", who.name, ack.t1, ack.t2, t1, t2)
			}
			var renewals, rebinds []wireDHCP
			for _, m := range of(list, who.mac, layers.DHCPMsgTypeRequest) {
				switch {
				case !m.at.After(ack.at):
				case m.dst == kernelAddr.Addr():
					renewals = append(renewals, m)
				case m.dst == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
					rebinds = append(rebinds, m)
				}
			}
			t.Logf("%s: ACK at %s; renewals %v; rebinding %v", who.name, ack.at.Format("15:04:05.000"), renewals, rebinds)
			if len(renewals) == 0 || len(rebinds) == 0 {
				t.Errorf("%s: %d renewals and %d rebinding REQUESTs after the ACK, want some of each", who.name, len(renewals), len(rebinds))
				continue
			}
			if at := renewals[0].at.Sub(ack.at); at < who.renewLo-time.Second-slack || at > who.renew+time.Second+slack {
				t.Errorf("%s renewed %v after the ACK, want %v to %v (T1 %v)", who.name, at.Round(time.Millisecond), who.renewLo, who.renew, t1)
			}
			if at := rebinds[0].at.Sub(ack.at); at < t2-time.Second-slack {
				t.Errorf("%s rebound %v after the ACK, before T2 %v", who.name, at.Round(time.Millisecond), t2)
			}
			if since, secs := rebinds[0].at.Sub(renewals[0].at), time.Duration(rebinds[0].secs)*time.Second; secs-since > time.Second+slack || since-secs > time.Second+slack {
				t.Errorf("%s's rebinding REQUEST says secs %d, %v after its first renewal", who.name, rebinds[0].secs, since.Round(time.Millisecond))
			}
			for _, m := range append(renewals, rebinds...) {
				if m.ciaddr != ack.yiaddr {
					t.Errorf("%s's REQUEST %v: ciaddr %v, want its leased address %v (RFC 2131 table 5)", who.name, m, m.ciaddr, ack.yiaddr)
				}
			}
		}
		// GoNet to the letter: one unicast at T1, one broadcast at T2.
		var renewals, rebinds []wireDHCP
		ack := of(list, gonetMAC, layers.DHCPMsgTypeAck)
		for _, m := range of(list, gonetMAC, layers.DHCPMsgTypeRequest) {
			switch {
			case len(ack) == 0 || !m.at.After(ack[0].at):
			case m.dst == kernelAddr.Addr():
				renewals = append(renewals, m)
			default:
				rebinds = append(rebinds, m)
			}
		}
		if len(ack) == 1 && len(rebinds) > 0 {
			if at := rebinds[0].at.Sub(ack[0].at); at > t2+time.Second+slack {
				t.Errorf("GoNet rebound %v after the ACK, want T2 %v", at.Round(time.Millisecond), t2)
			}
		}
		if len(renewals) != 1 || len(rebinds) != 1 {
			t.Errorf("GoNet sent %d renewals and %d rebinding REQUESTs, want 1 of each (section 4.4.5's 60 s minimum between them)", len(renewals), len(rebinds))
		}
	})
}
