package mdns

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/miekg/dns"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
)

// DNS-Based Service Discovery (RFC 6763) over the responder.

// sdZone is a host with two services, one of an instance name with a space
// and a dot, one of none given (the host's label).
func sdZone() zone {
	web := Service{Instance: "Web v1.2", Type: "_http._tcp", Port: 8080, TXT: []string{"path=/"}}
	ipp := Service{Type: "_ipp._tcp", Port: 631}
	return zone{
		host:  "gonet.local.",
		addrs: []netip.Addr{netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("fe80::2")},
		services: []instance{
			{Service: web, name: instanceName(web.Instance, web.Type)},
			{Service: ipp, name: instanceName("gonet", ipp.Type)},
		},
	}
}

// brief is a record as "name TYPE data" for comparing.
func brief(rr dns.RR) string {
	h := rr.Header()
	data := strings.TrimPrefix(rr.String(), h.String())
	return strings.ToLower(h.Name) + " " + dns.TypeToString[h.Rrtype] + " " + data
}

func TestAnswerForServiceDiscovery(t *testing.T) {
	querier := netip.MustParseAddrPort("10.0.0.1:5353")
	web := `web\ v1\.2._http._tcp.local.`
	q := func(name string, qtype uint16) *dns.Msg { return new(dns.Msg).SetQuestion(name, qtype) }
	tests := []struct {
		name         string
		q            *dns.Msg
		answers, add []string
	}{
		{"browsing a type: the instance, its SRV, TXT and the host's addresses", q("_http._tcp.local.", dns.TypePTR),
			[]string{"_http._tcp.local. PTR " + `Web\ v1\.2._http._tcp.local.`},
			[]string{web + " SRV 0 0 8080 gonet.local.", web + ` TXT "path=/"`, "gonet.local. A 10.0.0.2", "gonet.local. AAAA fe80::2"}},
		{"enumerating the types", q(servicesName, dns.TypePTR),
			[]string{servicesName + " PTR _http._tcp.local.", servicesName + " PTR _ipp._tcp.local."}, nil},
		{"an instance's SRV: the host's addresses with it", q(`Web\ v1\.2._http._tcp.local.`, dns.TypeSRV),
			[]string{web + " SRV 0 0 8080 gonet.local."}, []string{"gonet.local. A 10.0.0.2", "gonet.local. AAAA fe80::2"}},
		{"a TXT record of none given is one empty string", q("gonet._ipp._tcp.local.", dns.TypeTXT),
			[]string{`gonet._ipp._tcp.local. TXT ""`}, nil},
		{"ANY for an instance, in another case", q(`WEB\ V1\.2._HTTP._TCP.LOCAL.`, dns.TypeANY),
			[]string{web + " SRV 0 0 8080 gonet.local.", web + ` TXT "path=/"`}, []string{"gonet.local. A 10.0.0.2", "gonet.local. AAAA fe80::2"}},
		{"a type not offered", q("_ssh._tcp.local.", dns.TypePTR), nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			re, ok := answer(tt.q, querier, sdZone())
			if ok != (tt.answers != nil) {
				t.Fatalf("answered %v, want %v", ok, tt.answers != nil)
			}
			if !ok {
				return
			}
			var m dns.Msg
			if err := m.Unpack(re.msg); err != nil {
				t.Fatal(err)
			}
			var answers, add []string
			for _, rr := range m.Answer {
				answers = append(answers, brief(rr))
			}
			for _, rr := range m.Extra {
				add = append(add, brief(rr))
			}
			lower := func(s []string) []string {
				out := slices.Clone(s)
				for i := range out {
					out[i] = strings.ToLower(out[i])
				}
				slices.Sort(out)
				return out
			}
			if !slices.Equal(lower(answers), lower(tt.answers)) || !slices.Equal(lower(add), lower(tt.add)) {
				t.Fatalf("answers %q additional %q, want %q and %q", answers, add, tt.answers, tt.add)
			}
		})
	}
}

// A browser that already knows the instance (section 7.1 of RFC 6762) is
// not told it again; and gopacket, decoding the answer to a browser that
// does not, reads the instance, its port and its TXT.
func TestServiceAnswerAsGopacketDecodesIt(t *testing.T) {
	querier := netip.MustParseAddrPort("10.0.0.1:5353")
	z := sdZone()
	q := new(dns.Msg).SetQuestion("_http._tcp.local.", dns.TypePTR)
	re, ok := answer(q, querier, z)
	if !ok {
		t.Fatal("no answer")
	}
	p := gopacket.NewPacket(re.msg, layers.LayerTypeDNS, gopacket.Default)
	d, ok := p.Layer(layers.LayerTypeDNS).(*layers.DNS)
	if !ok {
		t.Fatalf("gopacket finds no DNS message: %v", p.ErrorLayer())
	}
	if len(d.Answers) != 1 || d.Answers[0].Type != layers.DNSTypePTR || string(d.Answers[0].PTR) != "Web v1.2._http._tcp.local" {
		t.Fatalf("answers %+v, want the PTR to the instance", d.Answers)
	}
	var port uint16
	var txt []string
	for _, rr := range d.Additionals {
		switch rr.Type {
		case layers.DNSTypeSRV:
			port = rr.SRV.Port
		case layers.DNSTypeTXT:
			for _, s := range rr.TXTs {
				txt = append(txt, string(s))
			}
		}
	}
	if port != 8080 || !slices.Equal(txt, []string{"path=/"}) {
		t.Fatalf("SRV port %d and TXT %q, want 8080 and path=/", port, txt)
	}
	q.Answer = []dns.RR{&dns.PTR{Hdr: header("_http._tcp.local.", dns.TypePTR, dns.ClassINET, otherTTL), Ptr: instanceName("Web v1.2", "_http._tcp")}}
	if re, ok := answer(q, querier, z); ok || re.suppressed != 1 {
		t.Fatalf("answered %v with %d suppressed: want the known PTR left out", ok, re.suppressed)
	}
}

// Two hosts advertising one instance name: the second moves to "Web (2)",
// keeping its own host name.
func TestTakenInstanceNameMovesToTheNext(t *testing.T) {
	a, b := stacktest.Pair(t, stacktest.Options{})
	web := Service{Instance: "Web", Type: "_http._tcp", Port: 80}
	rb, err := Start(b, "eth0", "host-b", web)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rb.Close() })
	if _, err := rb.WaitClaimed(t.Context()); err != nil {
		t.Fatal(err)
	}
	ra, err := Start(a, "eth0", "host-a", web)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ra.Close() })
	if _, err := ra.WaitClaimed(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := ra.Services()[0].Instance; got != "Web (2)" {
		t.Fatalf("the second host advertises %q, want Web (2)", got)
	}
	if ra.Name() != "host-a.local." || rb.Services()[0].Instance != "Web" {
		t.Fatalf("host %s, first instance %q: want host-a.local. and Web kept", ra.Name(), rb.Services()[0].Instance)
	}
}

func TestStartRefusesAServiceThatIsNone(t *testing.T) {
	_, b := stacktest.Pair(t, stacktest.Options{})
	for _, sv := range []Service{
		{Type: "http._tcp"},
		{Type: "_http._sctp"},
		{Type: "_a-very-long-service-name._tcp"},
		{Type: "_-x._tcp"},
		{Type: "_123._tcp"},
		{Type: "_http._tcp", Instance: strings.Repeat("x", 64)},
		{Type: "_http._tcp", TXT: []string{strings.Repeat("x", 256)}},
	} {
		if r, err := Start(b, "eth0", "gonet", sv); err == nil {
			r.Close()
			t.Errorf("Start took %+v", sv)
		}
	}
}
