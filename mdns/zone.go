package mdns

import (
	"bytes"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
)

// DNS-Based Service Discovery (RFC 6763) over the responder: each service
// the host offers is an instance name with an SRV record (its port, on
// the host's name) and a TXT record, pointed at by a PTR record of its
// type, which browsers ask for; the type in turn is pointed at by the
// service type enumeration's PTR record (section 9).

// Service is a service instance the responder advertises.
type Service struct {
	// Instance is the instance's name, a label of any UTF-8, spaces
	// included, of at most 63 bytes (RFC 6763 section 4.1.1): "GoNet
	// web server". Empty, the host's label. Another host advertising
	// the same instance makes the responder move to "Instance (2)", as
	// section 9 of RFC 6762 and appendix D of RFC 6763 suggest.
	Instance string
	// Type is the service type: its name (at most 15 letters, digits and
	// hyphens, RFC 6335 section 5.1) and protocol, as "_http._tcp".
	Type string
	// Port is the port the service listens on.
	Port uint16
	// TXT are the key=value strings of the TXT record (RFC 6763 section
	// 6), each at most 255 bytes; none gives the record one empty string,
	// as section 6.1 requires.
	TXT []string
}

// check reports what is wrong with s, if anything.
func (s Service) check() error {
	name, proto, ok := strings.Cut(s.Type, ".")
	if !ok || (proto != "_tcp" && proto != "_udp") || !serviceName(name) {
		return fmt.Errorf("mdns: service type %q: want _name._tcp or _name._udp, the name of 1 to 15 letters, digits and hyphens", s.Type)
	}
	if len(s.Instance) > 63 {
		return fmt.Errorf("mdns: service instance %q: more than 63 bytes", s.Instance)
	}
	for _, t := range s.TXT {
		if len(t) > 255 {
			return fmt.Errorf("mdns: service %s: a TXT string of more than 255 bytes", s.Type)
		}
	}
	return nil
}

// serviceName reports whether label is "_" and a service name (RFC 6335
// section 5.1: letters, digits and hyphens, a letter among them, no hyphen
// at either end or two together).
func serviceName(label string) bool {
	n, ok := strings.CutPrefix(label, "_")
	if !ok || len(n) < 1 || len(n) > 15 || n[0] == '-' || n[len(n)-1] == '-' || strings.Contains(n, "--") {
		return false
	}
	letter := false
	for _, c := range n {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			letter = true
		case c >= '0' && c <= '9', c == '-':
		default:
			return false
		}
	}
	return letter
}

// The names of service discovery: the service type enumeration's (RFC 6763
// section 9).
const servicesName = "_services._dns-sd._udp.local."

// otherTTL is the TTL of records not tied to the host's name (RFC 6762
// section 10: 75 minutes), the PTR and TXT records of services.
const otherTTL = 4500

// zone is what the responder holds at one moment: its host name's address
// records and its services' records, made from the names it claims and the
// NIC's addresses. The functions of message.go take one.
type zone struct {
	host     string // fully qualified: "gonet.local."
	addrs    []netip.Addr
	services []instance
}

// instance is a service under the name it claims now.
type instance struct {
	Service
	name string // fully qualified: "GoNet web._http._tcp.local."
}

// instanceName is the full name of label as an instance of typ, written
// as package dns writes a name it reads off the wire (a space, a dot or a
// byte that is no letter escaped), so that the two compare.
func instanceName(label, typ string) string {
	rest := make([]byte, 256)
	n, err := dns.PackDomainName(typ+".local.", rest, 0, nil, false)
	if err != nil || len(label) > 63 {
		return label + "." + typ + ".local." // Service.check refused it
	}
	wire := append(append([]byte{byte(len(label))}, label...), rest[:n]...)
	name, _, err := dns.UnpackDomainName(wire, 0)
	if err != nil {
		return label + "." + typ + ".local."
	}
	return name
}

// sameName reports whether a and b are one domain name: their wire forms
// equal but for the case of ASCII letters (RFC 6762 section 16).
func sameName(a, b string) bool {
	if strings.EqualFold(a, b) {
		return true
	}
	wa, wb := make([]byte, 256), make([]byte, 256)
	na, errA := dns.PackDomainName(dns.Fqdn(a), wa, 0, nil, false)
	nb, errB := dns.PackDomainName(dns.Fqdn(b), wb, 0, nil, false)
	return errA == nil && errB == nil && bytes.EqualFold(wa[:na], wb[:nb])
}

// owned returns the names of the zone's unique records, which the
// responder probes for and defends: the host's and each instance's.
func (z zone) owned() []string {
	names := []string{z.host}
	for _, s := range z.services {
		names = append(names, s.name)
	}
	return names
}

// records returns every record of the zone, unique ones (address, SRV,
// TXT) with the cache-flush bit when flush, as responses carry them
// (section 10.2), shared ones (PTR) never.
func (z zone) records(flush bool) []dns.RR {
	class := uint16(dns.ClassINET)
	if flush {
		class |= cacheFlush
	}
	out := records(z.host, z.addrs, dns.TypeANY, class, hostTTL)
	var types []string
	for _, s := range z.services {
		typ := s.Type + ".local."
		txt := s.TXT
		if len(txt) == 0 {
			txt = []string{""}
		}
		out = append(out,
			&dns.PTR{Hdr: header(typ, dns.TypePTR, dns.ClassINET, otherTTL), Ptr: s.name},
			&dns.SRV{Hdr: header(s.name, dns.TypeSRV, class, hostTTL), Port: s.Port, Target: z.host},
			&dns.TXT{Hdr: header(s.name, dns.TypeTXT, class, otherTTL), Txt: txt})
		if !slices.Contains(types, typ) {
			types = append(types, typ)
			out = append(out, &dns.PTR{Hdr: header(servicesName, dns.TypePTR, dns.ClassINET, otherTTL), Ptr: typ})
		}
	}
	return out
}

// unique returns the zone's unique records, as a probe proposes them
// (without the cache-flush bit).
func (z zone) unique() []dns.RR {
	return slices.DeleteFunc(z.records(false), func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypePTR })
}

// named returns those of rrs whose name is name, in any case.
func named(rrs []dns.RR, name string) []dns.RR {
	var out []dns.RR
	for _, rr := range rrs {
		if sameName(rr.Header().Name, name) {
			out = append(out, rr)
		}
	}
	return out
}

func header(name string, typ, class uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: typ, Class: class, Ttl: ttl}
}

// records returns the address records of name among addrs that qtype asks
// for, with class and ttl.
func records(name string, addrs []netip.Addr, qtype, class uint16, ttl uint32) []dns.RR {
	var out []dns.RR
	for _, a := range addrs {
		switch {
		case a.Is4() && (qtype == dns.TypeA || qtype == dns.TypeANY):
			out = append(out, &dns.A{Hdr: header(name, dns.TypeA, class, ttl), A: a.AsSlice()})
		case a.Is6() && (qtype == dns.TypeAAAA || qtype == dns.TypeANY):
			out = append(out, &dns.AAAA{Hdr: header(name, dns.TypeAAAA, class, ttl), AAAA: a.WithZone("").AsSlice()})
		}
	}
	return out
}
