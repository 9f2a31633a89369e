package stack_test

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/stack"
)

// A name in the static table is answered from it, whatever its case and
// with or without the final dot, and DNS is not asked; a name not in it
// goes to DNS as before.
func TestStaticHostsAnswerBeforeDNS(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	d := serveDNS(t, b)
	a.SetDNS(stack.DNSConfig{Servers: []netip.AddrPort{netip.AddrPortFrom(stacktest.AddrB.Addr(), 53)}})
	// DNS says printer.lan is 10.0.0.2; the table says otherwise.
	static := netip.MustParseAddr("10.0.0.9")
	if err := a.AddHost("printer.lan", static); err != nil {
		t.Fatal(err)
	}
	ctx := lookupCtx(t)
	for _, name := range []string{"printer.lan", "PRINTER.Lan", "printer.lan."} {
		addrs, err := a.LookupNetIP(ctx, "ip4", name)
		if err != nil || !slices.Equal(addrs, []netip.Addr{static}) {
			t.Errorf("LookupNetIP(%q) = %v, %v; want the table's %v", name, addrs, err, static)
		}
	}
	if asked := d.names("udp"); len(asked) != 0 {
		t.Errorf("DNS asked %v for names the table has", asked)
	}
	addrs, err := a.LookupNetIP(ctx, "ip4", "host.test")
	if err != nil || !slices.Equal(addrs, zone["host.test."]) {
		t.Errorf("LookupNetIP(host.test) = %v, %v; want DNS's %v", addrs, err, zone["host.test."])
	}
}

// A static name answers in the family asked, and a family it has no
// address of is not found, without DNS: the table, not DNS, owns the
// name, as /etc/hosts does for glibc and Go.
func TestStaticHostsAnswerTheFamilyAsked(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	d := serveDNS(t, b)
	a.SetDNS(stack.DNSConfig{Servers: []netip.AddrPort{netip.AddrPortFrom(stacktest.AddrB.Addr(), 53)}})
	v4, v6 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")
	if err := a.SetHosts([]stack.HostEntry{{Name: "gw", Addrs: []netip.Addr{v4, v6}}, {Name: "host.test", Addrs: []netip.Addr{v4}}}); err != nil {
		t.Fatal(err)
	}
	ctx := lookupCtx(t)
	for _, c := range []struct {
		network, name string
		want          []netip.Addr
	}{
		{"ip", "gw", []netip.Addr{v4, v6}},
		{"ip4", "gw", []netip.Addr{v4}},
		{"tcp6", "gw", []netip.Addr{v6}},
		{"ip6", "host.test", nil},
	} {
		addrs, err := a.LookupNetIP(ctx, c.network, c.name)
		if c.want == nil {
			var de *net.DNSError
			if !errors.As(err, &de) || !de.IsNotFound {
				t.Errorf("LookupNetIP(%s, %s) = %v, %v; want not found", c.network, c.name, addrs, err)
			}
			continue
		}
		if err != nil || !slices.Equal(addrs, c.want) {
			t.Errorf("LookupNetIP(%s, %s) = %v, %v; want %v", c.network, c.name, addrs, err, c.want)
		}
	}
	if asked := d.names("udp"); len(asked) != 0 {
		t.Errorf("DNS asked %v for names the table has", asked)
	}
}

// DialContext takes a static name with no DNS server configured at all.
func TestDialContextTakesAStaticNameWithoutDNS(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	l, err := b.Listen("tcp", ":7")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if err := a.AddHost("peer", stacktest.AddrB.Addr()); err != nil {
		t.Fatal(err)
	}
	c, err := a.DialContext(lookupCtx(t), "tcp", "peer:7")
	if err != nil {
		t.Fatalf("dial peer:7: %v", err)
	}
	defer c.Close()
	if got, want := c.RemoteAddr().String(), netip.AddrPortFrom(stacktest.AddrB.Addr(), 7).String(); got != want {
		t.Errorf("dial peer:7 reached %s, want %s", got, want)
	}
}

// LookupAddr gives an address's static names, absolute and in the order
// given, and asks DNS for the PTR record of any other.
func TestLookupAddrFromTheTableThenDNS(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	d := serveDNS(t, b)
	a.SetDNS(stack.DNSConfig{Servers: []netip.AddrPort{netip.AddrPortFrom(stacktest.AddrB.Addr(), 53)}})
	gw := netip.MustParseAddr("10.0.0.1")
	a.AddHost("gw.lan", gw)
	a.AddHost("router", gw)
	a.AddHost("ll", netip.MustParseAddr("fe80::1%eth0"))
	ctx := lookupCtx(t)
	for _, c := range []struct {
		addr string
		want []string
	}{
		{"10.0.0.1", []string{"gw.lan.", "router."}},
		{"::ffff:10.0.0.1", []string{"gw.lan.", "router."}},
		{"fe80::1", []string{"ll."}},
		{"fe80::1%eth1", []string{"ll."}},
	} {
		names, err := a.LookupAddr(ctx, netip.MustParseAddr(c.addr))
		if err != nil || !slices.Equal(names, c.want) {
			t.Errorf("LookupAddr(%s) = %v, %v; want %v", c.addr, names, err, c.want)
		}
	}
	if asked := d.names("udp"); len(asked) != 0 {
		t.Errorf("DNS asked %v for addresses the table has", asked)
	}
	_, err := a.LookupAddr(ctx, netip.MustParseAddr("10.0.0.2"))
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Errorf("LookupAddr(10.0.0.2) = %v; want DNS's not found", err)
	}
	if asked := d.names("udp"); !slices.Contains(asked, "2.0.0.10.in-addr.arpa.") {
		t.Errorf("DNS asked %v, want the PTR name 2.0.0.10.in-addr.arpa.", asked)
	}
}

// ParseHosts reads /etc/hosts's format: an address, a canonical name and
// aliases a line, comments from #, a name on several lines gathering
// their addresses; a line it cannot read is an error naming the line.
func TestParseHosts(t *testing.T) {
	good := `# GoNet's lab
10.0.0.1   gw.lan gw   # the router
fd00::1    gw.lan
fe80::1%tap0 gw-ll

10.0.0.7 www.lan
`
	entries, err := stack.ParseHosts(strings.NewReader(good))
	if err != nil {
		t.Fatal(err)
	}
	want := []stack.HostEntry{
		{Name: "gw.lan", Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd00::1")}},
		{Name: "gw", Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}},
		{Name: "gw-ll", Addrs: []netip.Addr{netip.MustParseAddr("fe80::1%tap0")}},
		{Name: "www.lan", Addrs: []netip.Addr{netip.MustParseAddr("10.0.0.7")}},
	}
	if !slices.EqualFunc(entries, want, func(x, y stack.HostEntry) bool { return x.Name == y.Name && slices.Equal(x.Addrs, y.Addrs) }) {
		t.Errorf("ParseHosts = %v, want %v", entries, want)
	}
	for _, c := range []struct{ text, wantErr string }{
		{"10.0.0.1 gw\n10.0.0.300 www\n", "line 2"},
		{"10.0.0.1\n", "line 1: address 10.0.0.1 with no name"},
		{"10.0.0.1 bad_name!\n", "line 1"},
		{"0.0.0.0 nothing\n", "line 1"},
		{"fd00::1%tap0 zoned\n", "line 1"},
	} {
		if _, err := stack.ParseHosts(strings.NewReader(c.text)); err == nil || !strings.Contains(err.Error(), c.wantErr) {
			t.Errorf("ParseHosts(%q) = %v, want an error with %q", c.text, err, c.wantErr)
		}
	}
}

// SetHosts replaces the table, and refuses a bad entry leaving the table
// as it was.
func TestSetHostsReplacesOrRefuses(t *testing.T) {
	a, _ := stacktest.Pair(t, stacktest.Options{})
	one := netip.MustParseAddr("10.0.0.1")
	a.AddHost("old", one)
	if err := a.SetHosts([]stack.HostEntry{{Name: "new.", Addrs: []netip.Addr{one}}}); err != nil {
		t.Fatal(err)
	}
	if got := a.Hosts(); len(got) != 1 || got[0].Name != "new" {
		t.Fatalf("Hosts() = %v, want new alone, without its dot", got)
	}
	for _, bad := range []stack.HostEntry{
		{Name: "no-address"},
		{Name: "bad name", Addrs: []netip.Addr{one}},
		{Name: "unspecified", Addrs: []netip.Addr{netip.IPv4Unspecified()}},
	} {
		if err := a.SetHosts([]stack.HostEntry{bad}); err == nil {
			t.Errorf("SetHosts(%v) accepted", bad)
		}
		if err := a.AddHost(bad.Name, bad.Addrs...); err == nil {
			t.Errorf("AddHost(%v) accepted", bad)
		}
	}
	if got := a.Hosts(); len(got) != 1 || got[0].Name != "new" {
		t.Errorf("Hosts() = %v after refusals, want new alone", got)
	}
}

// machineHost returns a name the machine's /etc/hosts gives an IPv4
// address, and that address; the test skips when it has none.
func machineHost(t *testing.T) (string, netip.Addr) {
	t.Helper()
	b, err := os.ReadFile("/etc/hosts")
	if err != nil {
		t.Skipf("no /etc/hosts to read: %v", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		line, _, _ = strings.Cut(line, "#")
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		if a, err := netip.ParseAddr(f[0]); err == nil && a.Is4() {
			return f[1], a
		}
	}
	t.Skip("the machine's /etc/hosts names no IPv4 address")
	return "", netip.Addr{}
}

// The machine's /etc/hosts, which Go's resolver reads before asking DNS,
// names the machine's neighbours, not GoNet's: the stack's own lookups
// drop what it answers, and ask the search list's names and DNS as for
// any other name.
func TestStackLookupsIgnoreTheMachinesHostsFile(t *testing.T) {
	name, addr := machineHost(t)
	a, b := stacktest.Pair(t, stacktest.Options{})
	d := serveDNS(t, b)
	a.SetDNS(stack.DNSConfig{Servers: []netip.AddrPort{netip.AddrPortFrom(stacktest.AddrB.Addr(), 53)}, Search: []string{"lan"}})
	ctx := lookupCtx(t)
	if got, err := a.Resolver().LookupNetIP(ctx, "ip4", name); err != nil || !slices.ContainsFunc(got, func(g netip.Addr) bool { return g.Unmap() == addr }) {
		t.Skipf("Go's resolver does not answer %s from /etc/hosts here (%v, %v): nothing to ignore", name, got, err)
	}
	addrs, err := a.LookupNetIP(ctx, "ip4", name)
	var de *net.DNSError
	if !errors.As(err, &de) || !de.IsNotFound {
		t.Errorf("LookupNetIP(%s) = %v, %v; want not found, as DNS says", name, addrs, err)
	}
	if asked := d.names("udp"); !slices.Contains(asked, name+".lan.") {
		t.Errorf("DNS asked %v, want %s.lan. from the search list", asked, name)
	}
	if names, err := a.LookupAddr(ctx, addr); !errors.As(err, &de) || !de.IsNotFound {
		t.Errorf("LookupAddr(%v) = %v, %v; want not found", addr, names, err)
	}
}
