package ip

import (
	"fmt"
	"net/netip"
	"syscall"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
)

// Route is how to reach a destination, as a Network's lookup found it.
// Transports keep one per connection and hand it back to SendRoute, so
// that a segment sent costs no lookup.
type Route struct {
	// Src is the source address to use, with the zone of the outgoing
	// interface when it is link-local (IPv6), as datagrams to it are
	// delivered (Header).
	Src     netip.Addr
	NextHop netip.Addr // the gateway, or the destination itself on-link
	Local   bool       // the destination is this host
	Bcast   bool       // a directed or limited broadcast (never for IPv6)
	// MTU is the largest datagram the route carries, network header
	// included: the link's, or the path MTU learnt for the destination
	// if less (RFC 1191, RFC 8201); 65535 for local delivery.
	MTU int
	// PMTULocked says the path MTU is the family's floor and datagrams
	// may need fragmenting on the way: IPv4 must send them without DF.
	PMTULocked bool
	// Offloads are what the route's link does for its datagrams
	// (checksums, TSO): none for local delivery.
	Offloads link.Capabilities
	// Iface is the family's own outgoing interface (ipv4's or ipv6's
	// *Interface), opaque to transports; nil for local delivery.
	Iface any
}

// SendParams describes a datagram to send, whichever the family.
type SendParams struct {
	Src   netip.Addr // invalid: chosen by the route
	Dst   netip.Addr
	Proto uint8 // IPv4's protocol, IPv6's upper-layer next header
	TTL   uint8 // IPv4's time to live or IPv6's hop limit; zero: the default
	TOS   uint8 // IPv4's type of service or IPv6's traffic class
	// DF forbids fragmenting the datagram here: a datagram longer than
	// the route's MTU fails with EMSGSIZE instead. For IPv4 it also sets
	// the header's DF bit (RFC 1191); IPv6 routers never fragment, and
	// for IPv6 it is RFC 3542 section 11.2's IPV6_DONTFRAG.
	DF bool
	// FlowLabel is IPv6's flow label, sent as given (RFC 6437): the
	// sender knows its flows and can label one once, where the network
	// layer would hash every datagram; zero leaves the datagram
	// unlabelled. IPv4 has no such field and ignores it.
	FlowLabel uint32
	// RouterAlert asks routers on the path to look at the datagram: IPv6
	// puts RFC 2711's Router Alert option, value 0 (MLD), in a Hop-by-Hop
	// Options header, as MLD's messages need (RFC 3810 section 5); IPv4
	// puts RFC 2113's in its header's options, as IGMP's need (RFC 3376
	// section 4).
	RouterAlert bool
	// Options are IPv4's header options, as they are to appear, padded
	// to a multiple of four bytes (40 at most, Router Alert's included):
	// an echo reply's Record Route and Timestamp (RFC 1122 section
	// 3.2.2.6), which get the sender's entry as the datagram leaves
	// (RFC 791 section 3.1). The slice is not kept. IPv6 ignores them:
	// its options travel in extension headers.
	Options []byte
	// MulticastLoop asks that a datagram to a multicast group also be
	// delivered to the host itself when the interface it leaves through
	// is a member of the group (IP_MULTICAST_LOOP, RFC 1112 section
	// 6.1).
	MulticastLoop bool
	// Confirm says the sender has seen forward progress from Dst since
	// its last datagram (TCP: an acknowledgement of new data): proof that
	// the next hop is reachable, which IPv6 passes to neighbour discovery
	// (RFC 4861 section 7.3.1), as Linux's dst_confirm does, so that a
	// busy connection's neighbour is not probed. IPv4 ignores it: ARP
	// keeps no reachability states.
	Confirm bool
}

// MulticastRouter is a Network that sends to a multicast group out of an
// interface the sender names, as a socket's IP_MULTICAST_IF or
// IPV6_MULTICAST_IF asks; ipv4 and ipv6 both are.
type MulticastRouter interface {
	// MulticastRoute is the route to group out of the interface named
	// ifname, or out of the one Route would pick for an empty name.
	MulticastRoute(group netip.Addr, ifname string) (Route, error)
}

// Network is a network layer (ipv4, ipv6) as the transports use it: to
// route and send, to tell its addresses apart, and to report errors about
// datagrams they drop. Its methods are safe for concurrent use, and the
// ones on the data path (Route, SendRoute, IsLocal, IsHostDst,
// IsBroadcast) neither lock nor allocate.
type Network interface {
	// Register binds a transport to its protocol number (next header).
	Register(proto uint8, t Transport)
	// Route finds how to reach dst.
	Route(dst netip.Addr) (Route, error)
	// Send routes and sends pkt, whose data is the transport header and
	// payload. It takes ownership of pkt in every case.
	Send(pkt *buffer.Packet, sp SendParams) error
	// SendRoute is Send on a route Route found.
	SendRoute(pkt *buffer.Packet, sp SendParams, r Route) error
	// IsLocal reports whether a is one of the host's addresses.
	IsLocal(a netip.Addr) bool
	// IsHostDst reports whether a datagram to a is for the host itself,
	// rather than for a foreign address a forwarding interface took:
	// sockets bound to the wildcard address take only those.
	IsHostDst(a netip.Addr) bool
	// IsBroadcast reports whether a is a broadcast address of the host's
	// (always false for IPv6, which has none).
	IsBroadcast(a netip.Addr) bool
	// UpdatePMTU takes a transport's validated report that a datagram of
	// quotedLen bytes to dst met a link whose MTU is mtu (zero: unknown),
	// and returns the path MTU in force afterwards (zero: no route).
	UpdatePMTU(dst netip.Addr, mtu, quotedLen int) int
	// HeaderLen is the length of the family's header without options or
	// extension headers (20, 40): a route's MTU less it is what a
	// transport's segment may take (TCP's MSS, RFC 9293 3.7.1).
	HeaderLen() int
	// ReportError tells the source of orig, a datagram the transport
	// drops (its bytes from the network header on, as HandleIP got
	// them), why, with the family's error message for kind (ICMP,
	// ICMPv6), unless the family's rules forbid it (no error about an
	// error, a broadcast, a multicast) or its rate limit is reached.
	ReportError(orig []byte, kind ErrorKind)
}

// DeviceRouter is a Network that can route out one named interface only,
// for sockets bound to a device (Linux's SO_BINDTODEVICE): a DHCP client
// broadcasts on the link it configures before it has an address there.
type DeviceRouter interface {
	RouteVia(dst netip.Addr, iface string) (Route, error)
}

// ErrorKind is why a datagram was not delivered, in words both families'
// error messages have: each maps it to its own type and code (RFC 792,
// RFC 4443) on the way out, and back on the way in.
type ErrorKind uint8

// The error kinds. Where IPv4 has several codes for one kind (network
// unreachable and unknown, host unreachable and unknown, ...) they map to
// one; transports tell them apart no further than Linux does.
const (
	// NetUnreachable: no route to the destination's network (ICMP
	// codes 0, 6, 9, 11; ICMPv6 code 0).
	NetUnreachable ErrorKind = iota + 1
	// HostUnreachable: the destination did not answer on its link (ICMP
	// codes 1, 5, 7, 8, 10, 12, 14, 15; ICMPv6 code 3, address
	// unreachable).
	HostUnreachable
	// ProtoUnreachable: no transport for the protocol (ICMP code 2;
	// ICMPv6's parameter problem, unrecognised next header).
	ProtoUnreachable
	// PortUnreachable: no socket on the port (ICMP code 3, ICMPv6 code 4).
	PortUnreachable
	// AdminProhibited: a filter refused the datagram (ICMP code 13,
	// ICMPv6 code 1).
	AdminProhibited
	// PacketTooBig: longer than the next link's MTU, which comes with it
	// (ICMP code 4, fragmentation needed and DF set; ICMPv6 packet too
	// big).
	PacketTooBig
	// TimeExceeded: the hop limit ran out in transit (ICMP and ICMPv6
	// time exceeded, code 0).
	TimeExceeded
	// ReassemblyTimeout: the datagram's fragments did not all arrive in
	// time (time exceeded, code 1, in both).
	ReassemblyTimeout
	// ParameterProblem: a header field the receiver could not process.
	ParameterProblem
)

var kindNames = [...]string{
	NetUnreachable:    "network unreachable",
	HostUnreachable:   "host unreachable",
	ProtoUnreachable:  "protocol unreachable",
	PortUnreachable:   "port unreachable",
	AdminProhibited:   "administratively prohibited",
	PacketTooBig:      "packet too big",
	TimeExceeded:      "time exceeded",
	ReassemblyTimeout: "reassembly time exceeded",
	ParameterProblem:  "parameter problem",
}

func (k ErrorKind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("ErrorKind(%d)", uint8(k))
}

// Errno is the error an application sees for kind, as Linux's
// icmp_err_convert and icmpv6_err_convert give it.
func (k ErrorKind) Errno() syscall.Errno {
	switch k {
	case NetUnreachable:
		return syscall.ENETUNREACH
	case ProtoUnreachable:
		return syscall.ENOPROTOOPT
	case PortUnreachable:
		return syscall.ECONNREFUSED
	case PacketTooBig:
		return syscall.EMSGSIZE
	case ParameterProblem:
		return syscall.EPROTO
	}
	return syscall.EHOSTUNREACH
}

// Hard reports whether RFC 1122 section 4.2.3.9 calls an error of kind
// hard: protocol and port unreachable, which end a connection attempt.
func (k ErrorKind) Hard() bool { return k == ProtoUnreachable || k == PortUnreachable }

// ICMPError is an ICMP or ICMPv6 error about a datagram this host sent, as
// the network layer hands it to the transport of the datagram it quotes
// (RFC 1122 section 3.2.2, RFC 4443 section 3): the same for both
// families, so that a transport handles both with one function.
type ICMPError struct {
	Kind ErrorKind
	// MTU is the next hop's MTU for PacketTooBig, zero when the router
	// did not say (routers older than RFC 1191).
	MTU int
	// Src and Dst are the quoted datagram's addresses: the transport's
	// local and remote ones.
	Src, Dst netip.Addr
	// QuotedLen is the quoted datagram's length as its header gives it
	// (RFC 1191 section 5 guesses an MTU below it when MTU is zero).
	QuotedLen int
	// DF says the quoted datagram forbade fragmenting on the way: only
	// then can PacketTooBig be about it (always so for IPv6).
	DF bool
	// Local says the host itself sent the error: its own resolution of
	// the datagram's next hop failed (ARP, neighbour discovery), a report
	// no one off the host forged and no router's passing opinion.
	Local bool
	// Transport is the quoted transport header and what follows of it:
	// 8 bytes at least, enough for ports and TCP's sequence number. It
	// is the network layer's buffer, valid only during the call.
	Transport []byte
}

// ErrorHandler is implemented by the transports that want the ICMP and
// ICMPv6 errors quoting their datagrams (TCP: path MTU discovery, soft and
// hard errors). The network layer finds it by the quoted protocol number.
type ErrorHandler interface {
	// HandleICMPError runs in the network layer's dealer goroutine and
	// must not block.
	HandleICMPError(e ICMPError)
}

// Networks are the network layers a transport sends through, one per
// family: a small value with no lookup beyond the address's family.
type Networks struct {
	V4, V6 Network
}

// ErrNoNetwork is returned by Networks.For for a family the stack does
// not run; it wraps syscall.EAFNOSUPPORT, as Go's net reports an address
// of a family the host lacks.
var ErrNoNetwork = fmt.Errorf("ip: no network layer for the address's family: %w", syscall.EAFNOSUPPORT)

// For returns the network of a's family.
func (n *Networks) For(a netip.Addr) (Network, error) {
	var nw Network
	if a.Is4() {
		nw = n.V4
	} else if a.Is6() {
		nw = n.V6
	}
	if nw == nil {
		return nil, ErrNoNetwork
	}
	return nw, nil
}

// Each calls f for each network the stack runs.
func (n *Networks) Each(f func(Network)) {
	if n.V4 != nil {
		f(n.V4)
	}
	if n.V6 != nil {
		f(n.V6)
	}
}
