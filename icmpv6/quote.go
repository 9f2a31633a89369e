package icmpv6

import "github.com/gonetstack/gonet/wire"

// The datagram an error message quotes, or would quote: from its IPv6
// header through its extension headers to the upper-layer header, which
// says whose datagram it was (RFC 4443 section 2.4 (d)) and whether it was
// itself an error (section 2.4 (e.1)). The walk is lighter than the IPv6
// layer's ipv6.WalkChain, which applies a receiver's rules to options and
// routing types: here the datagram was already processed, by the host
// that sent it or by the layer that refused it, and only its headers'
// lengths matter; a quote may also end anywhere.

// protoAH is the Authentication Header (RFC 4302), whose length counts
// 4-byte words beyond the first two, unlike the other extension headers.
const protoAH = 51

// maxQuotedHeaders bounds the walk, as ipv6.MaxExtHeaders bounds the
// layer's.
const maxQuotedHeaders = 8

// upper is where a walk of a datagram's headers ended.
type upper struct {
	proto uint8 // the upper-layer protocol, or the header the walk stopped at
	off   int   // where that header starts
	// laterFragment says the walk stopped at a Fragment header of
	// offset other than zero: what follows is data, and proto names
	// what the datagram's fragmentable part starts with.
	laterFragment bool
	// truncated says an extension header runs past the bytes given, or
	// the chain is longer than the walk goes: proto is not the upper
	// layer.
	truncated bool
}

// upperLayer walks d, an IPv6 datagram or the start of one (at least the
// fixed header), to its upper-layer header.
func upperLayer(d []byte) upper {
	u := upper{proto: wire.IPv6(d).NextHeader(), off: wire.IPv6HeaderLen}
	for i := 0; ; i++ {
		if i == maxQuotedHeaders && isExtHeader(u.proto) {
			u.truncated = true
			return u
		}
		var n int
		switch u.proto {
		case wire.ProtoHopByHop, wire.ProtoRouting, wire.ProtoDestOpts:
			x, ok := wire.ParseIPv6ExtHdr(d[u.off:])
			if !ok {
				u.truncated = true
				return u
			}
			n = x.Len()
		case protoAH:
			if len(d)-u.off < 2 {
				u.truncated = true
				return u
			}
			n = (int(d[u.off+1]) + 2) * 4
		case wire.ProtoFragment:
			f, ok := wire.ParseIPv6Fragment(d[u.off:])
			if !ok {
				u.truncated = true
				return u
			}
			if f.Offset() != 0 {
				u.proto, u.laterFragment = f.NextHeader(), true
				return u
			}
			n = wire.IPv6FragmentLen
		default:
			return u
		}
		if u.off+n > len(d) {
			u.truncated = true
			return u
		}
		u.proto, u.off = d[u.off], u.off+n
	}
}

func isExtHeader(proto uint8) bool {
	switch proto {
	case wire.ProtoHopByHop, wire.ProtoRouting, wire.ProtoDestOpts, wire.ProtoFragment, protoAH:
		return true
	}
	return false
}
