// Package dhcp is GoNet's Dynamic Host Configuration Protocol for IPv4
// (RFC 2131, options from RFC 2132), over GoNet's own UDP sockets: the
// server a gateway runs for its guests, and the client a host runs to be
// given its address (StartOn).
//
// Messages are encoded and decoded by github.com/insomniacslk/dhcp/dhcpv4
// for both; this package holds the protocol. The server: the addresses it
// hands out and the options it gives (config.go), which address a client
// gets (leases.go), and what it answers to each message, and where (RFC
// 2131 sections 4.3 and 4.1, this file). The client: section 4.4's state
// machine (client.go, clientstate.go), its messages (clientmsg.go), the
// lease it reads from an ACK and keeps across restarts (clientlease.go),
// and what it applies to the stack (clienthost.go, stack.go).
package dhcp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"github.com/gonetstack/gonet/stats"
)

// The ports of RFC 2131 section 4.1.
const (
	ServerPort = 67
	ClientPort = 68
)

// Stats are the server's counters: every message in by type, every reply
// out by type, and every message dropped by why.
type Stats struct {
	InDiscovers stats.Counter
	InRequests  stats.Counter
	InDeclines  stats.Counter
	InReleases  stats.Counter
	InInforms   stats.Counter

	OutOffers stats.Counter
	OutAcks   stats.Counter
	OutNaks   stats.Counter
	OutErrors stats.Counter // the socket refused a reply

	InMalformed   stats.Counter // not a DHCP message (RFC 2131 section 2), or a field out of range
	InNotRequest  stats.Counter // op is not BOOTREQUEST
	InUnknownType stats.Counter // no message type (BOOTP), or one a server does not take
	InOtherServer stats.Counter // for another server: its identifier in a REQUEST, DECLINE or RELEASE
	InBadRequest  stats.Counter // a REQUEST with neither a requested address nor ciaddr
	InNotOurs     stats.Counter // a DECLINE or RELEASE of an address the client does not hold
	PoolExhausted stats.Counter // a DISCOVER for which no address was free
}

// PacketConn is the socket the server serves on: a *udp.Conn bound to
// 0.0.0.0:67 on a GoNet stack.
type PacketConn interface {
	ReadFromUDPAddrPort(b []byte) (int, netip.AddrPort, error)
	WriteToUDPAddrPort(b []byte, addr netip.AddrPort) (int, error)
}

// Server is a DHCP server. It is safe for concurrent use.
type Server struct {
	cfg     Config
	mask    net.IPMask
	options dhcpv4.Options // sent in every OFFER and ACK, and to INFORM

	mu     sync.Mutex
	leases *table

	log serverLog // log.go

	Stats Stats
}

// NewServer returns a server for cfg, or an error saying which of its
// fields does not fit.
func NewServer(cfg Config) (*Server, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:    cfg,
		mask:   net.CIDRMask(cfg.Network.Bits(), 32),
		leases: newTable(cfg.FirstLease, cfg.PoolSize, append([]netip.Addr{cfg.Server, cfg.Router}, cfg.DNS...)),
		log:    newServerLog(&cfg),
	}
	// RFC 2132 sections 3.3, 3.5, 3.8, 5.1 and 5.3.
	s.options = dhcpv4.Options{}
	s.options.Update(dhcpv4.OptSubnetMask(s.mask))
	s.options.Update(dhcpv4.OptRouter(ip(cfg.Router)))
	if len(cfg.DNS) > 0 {
		dns := make([]net.IP, len(cfg.DNS))
		for i, a := range cfg.DNS {
			dns[i] = ip(a)
		}
		s.options.Update(dhcpv4.OptDNS(dns...))
	}
	if cfg.MTU != 0 {
		s.options.Update(dhcpv4.OptGeneric(dhcpv4.OptionInterfaceMTU, []byte{byte(cfg.MTU >> 8), byte(cfg.MTU)}))
	}
	bcast := u32(cfg.Network.Masked().Addr()) | (1<<(32-cfg.Network.Bits()) - 1)
	s.options.Update(dhcpv4.OptBroadcastAddress(ip(addrOf(bcast))))
	return s, nil
}

// Serve answers the requests that arrive on c until reading from it fails;
// it returns nil when c was closed.
func (s *Server) Serve(c PacketConn) error {
	// The largest UDP payload: a message longer than the buffer would be
	// cut short and then refused as malformed.
	buf := make([]byte, 65535)
	for {
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("dhcp: serve: %w", err)
		}
		reply, to, ok := s.handle(buf[:n], from)
		if !ok {
			continue
		}
		if _, err := c.WriteToUDPAddrPort(reply, to); err != nil {
			s.Stats.OutErrors.Inc()
		}
	}
}

// Lease is a bound lease, as Leases lists it.
type Lease struct {
	Addr         netip.Addr
	HardwareAddr net.HardwareAddr
	// ClientID is the client identifier (option 61) the client sent, or
	// its hardware type and address (RFC 2132 section 9.14).
	ClientID []byte
	Expiry   time.Time
}

// Leases returns the bound leases that have not expired, by address.
func (s *Server) Leases() []Lease {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Lease
	a := s.leases.first
	for range s.leases.size {
		if r := s.leases.byAddr[a]; r != nil && r.state == bound && r.live(now) {
			out = append(out, Lease{Addr: r.addr, HardwareAddr: net.HardwareAddr(append([]byte(nil), r.hw...)), ClientID: []byte(r.client), Expiry: r.expiry})
		}
		a = a.Next()
	}
	return out
}

// handle answers one message from a client: the reply's bytes and where to
// send them, or false when the server stays silent.
func (s *Server) handle(msg []byte, from netip.AddrPort) ([]byte, netip.AddrPort, bool) {
	req, err := dhcpv4.FromBytes(msg)
	if err != nil || !wellFormed(req) {
		s.Stats.InMalformed.Inc()
		return nil, netip.AddrPort{}, false
	}
	if req.OpCode != dhcpv4.OpcodeBootRequest {
		s.Stats.InNotRequest.Inc()
		return nil, netip.AddrPort{}, false
	}
	var reply *dhcpv4.DHCPv4
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		s.Stats.InDiscovers.Inc()
		reply = s.discover(req)
	case dhcpv4.MessageTypeRequest:
		s.Stats.InRequests.Inc()
		reply = s.request(req)
	case dhcpv4.MessageTypeDecline:
		s.Stats.InDeclines.Inc()
		s.decline(req)
	case dhcpv4.MessageTypeRelease:
		s.Stats.InReleases.Inc()
		s.release(req)
	case dhcpv4.MessageTypeInform:
		s.Stats.InInforms.Inc()
		reply = s.inform(req)
	default:
		s.Stats.InUnknownType.Inc()
	}
	if reply == nil {
		return nil, netip.AddrPort{}, false
	}
	switch reply.MessageType() {
	case dhcpv4.MessageTypeOffer:
		s.Stats.OutOffers.Inc()
	case dhcpv4.MessageTypeAck:
		s.Stats.OutAcks.Inc()
	case dhcpv4.MessageTypeNak:
		s.Stats.OutNaks.Inc()
	}
	return reply.ToBytes(), destination(req, reply, from), true
}

// wellFormed checks what the decoder leaves to the server: addresses of
// four bytes and a hardware address of at most 16 (RFC 2131 section 2).
func wellFormed(m *dhcpv4.DHCPv4) bool {
	for _, a := range []net.IP{m.ClientIPAddr, m.YourIPAddr, m.ServerIPAddr, m.GatewayIPAddr} {
		if len(a) != net.IPv4len {
			return false
		}
	}
	return len(m.ClientHWAddr) <= dhcpv4.MaxHWAddrLen
}

// clientKey identifies a client: by its client identifier when it sends
// one, else by its hardware type and address (RFC 2131 section 4.2; the
// same form as RFC 2132 section 9.14's identifier, so that a client that
// sends its MAC as identifier keeps its lease whether it does or not).
func clientKey(m *dhcpv4.DHCPv4) string {
	if id := m.Options.Get(dhcpv4.OptionClientIdentifier); len(id) > 0 {
		return string(id)
	}
	return string(append([]byte{byte(m.HWType)}, m.ClientHWAddr...))
}

// discover answers a DHCPDISCOVER (RFC 2131 section 4.3.1): an address for
// the client, reserved for OfferHold, in a DHCPOFFER.
func (s *Server) discover(req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	key := clientKey(req)
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.leases
	// In the order of section 4.3.1: the client's current or previous
	// address, the address it asks for, then any free one.
	var a netip.Addr
	if r := t.ofClient(key); r != nil {
		a = r.addr
	} else if want := addr(req.RequestedIPAddress()); t.free(want, key, now) {
		a = want
	} else if free, ok := t.pick(now); ok {
		a = free
	} else {
		s.poolExhausted(req.ClientHWAddr)
		return nil
	}
	if r := t.ofClient(key); r != nil && r.addr == a && r.state == bound && r.live(now) {
		// A bound client that starts over keeps its lease as it is.
	} else {
		t.hold(a, key, req.ClientHWAddr, offered, now.Add(s.cfg.OfferHold))
	}
	return s.reply(req, dhcpv4.MessageTypeOffer, a, true)
}

// request answers a DHCPREQUEST (RFC 2131 section 4.3.2), which a client
// sends in four states told apart by its fields.
func (s *Server) request(req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	key := clientKey(req)
	requested := addr(req.RequestedIPAddress())
	ciaddr := addr(req.ClientIPAddr)
	var a netip.Addr
	switch sid := addr(req.ServerIdentifier()); {
	case sid.IsValid():
		// SELECTING: the client answers an OFFER. When it chose another
		// server, the address offered to it goes back to the pool.
		if sid != s.cfg.Server {
			s.Stats.InOtherServer.Inc()
			s.withdrawOffer(key)
			return nil
		}
		a = requested
	case requested.IsValid():
		// INIT-REBOOT: the client checks the address it remembers. A
		// wrong one is NAKed; one not on our network is always wrong.
		a = requested
	case ciaddr.IsValid() && !ciaddr.IsUnspecified():
		// RENEWING (unicast to us) or REBINDING (broadcast): the client
		// extends the lease it has on ciaddr.
		a = ciaddr
	default:
		s.Stats.InBadRequest.Inc()
		return nil
	}
	if s.grant(key, req.ClientHWAddr, a) {
		return s.reply(req, dhcpv4.MessageTypeAck, a, true)
	}
	// The server is the only one on the link it serves, and so answers
	// for addresses it has no record of (as an authoritative ISC server
	// does) where section 4.3.2 has a server that may not know the
	// client stay silent: a client told NAK starts over at once instead
	// of waiting out its retransmissions.
	return s.nak(req)
}

// grant binds a to the client for LeaseTime if a is the client's own or
// free, and reports whether it did.
func (s *Server) grant(key string, hw []byte, a netip.Addr) bool {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	if !s.leases.free(a, key, now) {
		s.mu.Unlock()
		return false
	}
	r := s.leases.ofClient(key)
	renewed := r != nil && r.addr == a && r.state == bound && r.live(now)
	s.leases.hold(a, key, hw, bound, now.Add(s.cfg.LeaseTime))
	s.mu.Unlock()
	s.granted(hw, a, renewed)
	return true
}

// withdrawOffer frees the address offered to a client that took another
// server's offer.
func (s *Server) withdrawOffer(key string) {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if r := s.leases.ofClient(key); r != nil && r.state == offered {
		r.expiry = now
	}
}

// decline takes the address a client found in use (DHCPDECLINE, RFC 2131
// section 4.3.3) out of the pool for DeclineHold.
func (s *Server) decline(req *dhcpv4.DHCPv4) {
	ok := s.onClientRecord(req, addr(req.RequestedIPAddress()), func(r *record, now time.Time) bool {
		s.leases.decline(r, now.Add(s.cfg.DeclineHold))
		return true
	})
	if ok {
		s.declined(req.ClientHWAddr, addr(req.RequestedIPAddress()), s.cfg.DeclineHold)
	}
}

// release ends a client's lease early (DHCPRELEASE, RFC 2131 section
// 4.3.4). The record keeps the client, which gets the same address again
// if nobody took it meanwhile.
func (s *Server) release(req *dhcpv4.DHCPv4) {
	ok := s.onClientRecord(req, addr(req.ClientIPAddr), func(r *record, now time.Time) bool {
		if r.state != bound {
			return false
		}
		r.expiry = now
		return true
	})
	if ok {
		s.released(req.ClientHWAddr, addr(req.ClientIPAddr))
	}
}

// onClientRecord applies act, under mu, to the record of the client that
// sent req, a message that changes its lease without a reply: it must name
// this server and the address the record holds, a; act reports false when
// the record's state does not allow it. What is refused is counted; it
// reports whether act was applied.
func (s *Server) onClientRecord(req *dhcpv4.DHCPv4, a netip.Addr, act func(r *record, now time.Time) bool) bool {
	if sid := addr(req.ServerIdentifier()); sid != s.cfg.Server {
		s.Stats.InOtherServer.Inc()
		return false
	}
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.leases.ofClient(clientKey(req))
	if r == nil || r.addr != a || !act(r, now) {
		s.Stats.InNotOurs.Inc()
		return false
	}
	return true
}

// inform answers a DHCPINFORM (RFC 2131 section 4.3.5): the configuration
// without a lease, for a client that has its address already.
func (s *Server) inform(req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	return s.reply(req, dhcpv4.MessageTypeAck, netip.Addr{}, false)
}

// nak refuses a DHCPREQUEST (RFC 2131 section 4.3.2, table 3).
func (s *Server) nak(req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	m := s.header(req, dhcpv4.MessageTypeNak)
	m.Options.Update(dhcpv4.OptMessage("address not available"))
	if !addr(req.GatewayIPAddr).IsUnspecified() {
		// Section 4.3.2: the relay agent broadcasts it to the client.
		m.SetBroadcast()
	}
	return m
}

// reply builds an OFFER or ACK (RFC 2131 section 4.3.1, table 3): yiaddr
// a (none for an ACK to INFORM), the configuration, and with a lease its
// times.
func (s *Server) reply(req *dhcpv4.DHCPv4, typ dhcpv4.MessageType, a netip.Addr, lease bool) *dhcpv4.DHCPv4 {
	m := s.header(req, typ)
	if a.IsValid() {
		m.YourIPAddr = ip(a)
	}
	if typ == dhcpv4.MessageTypeAck {
		m.ClientIPAddr = req.ClientIPAddr
	}
	for code, v := range s.options {
		m.Options[code] = v
	}
	if lease {
		lt := s.cfg.LeaseTime.Truncate(time.Second)
		m.Options.Update(dhcpv4.OptIPAddressLeaseTime(lt))
		m.Options.Update(dhcpv4.OptRenewTimeValue((lt / 2).Truncate(time.Second)))
		// Seven eighths as the lease less an eighth: 2^32 seconds in
		// nanoseconds times seven overflows.
		m.Options.Update(dhcpv4.OptRebindingTimeValue((lt - lt/8).Truncate(time.Second)))
	}
	return m
}

// header starts a reply to req: the fields every reply copies (table 3)
// and the message type and server identifier options.
func (s *Server) header(req *dhcpv4.DHCPv4, typ dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	m := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        req.HWType,
		TransactionID: req.TransactionID,
		Flags:         req.Flags,
		ClientIPAddr:  net.IPv4zero.To4(),
		YourIPAddr:    net.IPv4zero.To4(),
		ServerIPAddr:  net.IPv4zero.To4(),
		GatewayIPAddr: req.GatewayIPAddr,
		ClientHWAddr:  req.ClientHWAddr,
		Options:       dhcpv4.Options{},
	}
	if m.HWType == 0 {
		m.HWType = iana.HWTypeEthernet
	}
	m.Options.Update(dhcpv4.OptMessageType(typ))
	m.Options.Update(dhcpv4.OptServerIdentifier(ip(s.cfg.Server)))
	// RFC 6842: the client identifier comes back, so that a client can
	// tell its replies from others'.
	if id := req.Options.Get(dhcpv4.OptionClientIdentifier); id != nil {
		m.Options.Update(dhcpv4.OptClientIdentifier(id))
	}
	return m
}

// destination is where a reply goes (RFC 2131 section 4.1): to the relay
// agent when one forwarded the request; a NAK to everyone; to ciaddr when
// the client has an address; otherwise broadcast, which every client takes.
// Section 4.1 would have the server unicast to yiaddr at chaddr when the
// broadcast bit is clear, but that needs an ARP entry the client has not
// answered for; servers that cannot make one broadcast, as allowed there.
func destination(req, reply *dhcpv4.DHCPv4, from netip.AddrPort) netip.AddrPort {
	if g := addr(req.GatewayIPAddr); !g.IsUnspecified() {
		return netip.AddrPortFrom(g, ServerPort)
	}
	bcast := netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), ClientPort)
	if reply.MessageType() == dhcpv4.MessageTypeNak {
		return bcast
	}
	if c := addr(req.ClientIPAddr); !c.IsUnspecified() {
		return netip.AddrPortFrom(c, ClientPort)
	}
	if req.MessageType() == dhcpv4.MessageTypeInform && from.Addr().Is4() && !from.Addr().IsUnspecified() {
		// An INFORM without ciaddr: its source is the client's address.
		return netip.AddrPortFrom(from.Addr(), ClientPort)
	}
	return bcast
}

// addr converts a decoded address; an absent one is invalid.
func addr(a net.IP) netip.Addr {
	v, ok := netip.AddrFromSlice(a.To4())
	if !ok {
		return netip.Addr{}
	}
	return v
}

func ip(a netip.Addr) net.IP { return net.IP(a.AsSlice()) }

func addrOf(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
