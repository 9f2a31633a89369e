package ipv6

// This file walks a received datagram's extension header chain by the rules
// of RFC 8200 section 4, as a pure function: the dealer acts on the verdict
// (delivers, hands to reassembly, counts a drop, or asks for an ICMPv6
// Parameter Problem), so the rules can be tested on bytes alone.

import (
	"strconv"

	"github.com/gonetstack/gonet/wire"
)

// Bounds on the chain. RFC 8200 section 4.1 lets a chain be any length, but
// RFC 7045 section 2.1 and RFC 8504 section 5.3 allow a node to limit the
// number and size of extension headers it will process, since a long chain
// is a cheap way to make a receiver work. A real chain has at most a
// Hop-by-Hop, two Destination Options, a Routing and a Fragment header
// (the order of RFC 8200 section 4.1), plus AH or ESP, which end the walk:
// eight headers leave room for that with margin. RFC 7112 section 5 asks
// that the whole chain be in the first fragment, and RFC 8200 section 5
// only promises 1280 bytes on a path, so a chain that reaches past the
// first 1280 bytes could not cross the Internet fragmented: no sender
// needs one.
const (
	MaxExtHeaders = 8
	MaxChainLen   = wire.IPv6MinMTU
)

// Verdict is what the dealer does with a walked datagram.
type Verdict uint8

// The verdicts.
const (
	// Deliver hands the upper-layer packet at Chain.Offset to the
	// protocol Chain.Proto names; an unknown protocol is for the
	// upper-layer demux to refuse (Parameter Problem code 1 then).
	Deliver Verdict = iota
	// Reassemble hands a fragment to reassembly (RFC 8200 section 4.5):
	// Chain.Proto and Chain.Offset describe the fragmentable part.
	Reassemble
	// NoNext ends processing with nothing to deliver (RFC 8200 section
	// 4.7: No Next Header).
	NoNext
	// Discard drops the datagram silently; Chain.Reason says why.
	Discard
	// SendParamProblem drops the datagram and asks for an ICMPv6
	// Parameter Problem (RFC 4443 section 3.4) as Chain.Problem says.
	SendParamProblem
)

var verdictText = [...]string{"deliver", "reassemble", "no next header", "discard", "parameter problem"}

// String names the verdict.
func (v Verdict) String() string {
	if int(v) < len(verdictText) {
		return verdictText[v]
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// DropReason says why a datagram was not delivered, so that the dealer
// counts each reason apart, as the IPv4 layer does with wire.IPv4Error.
type DropReason uint8

// The reasons.
const (
	ReasonNone             DropReason = iota
	ReasonTruncated                   // an extension header runs past the datagram
	ReasonBadOptions                  // an option runs past its header
	ReasonTooManyHeaders              // more than MaxExtHeaders
	ReasonChainTooLong                // an extension header ends past MaxChainLen bytes
	ReasonHopByHopNotFirst            // RFC 8200 section 4.1
	ReasonUnknownRouting              // RFC 8200 section 4.4
	ReasonUnknownOption               // RFC 8200 section 4.2, by the option's action bits
	ReasonIncompleteChain             // RFC 7112 section 5
	ReasonBadFragmentLen              // RFC 8200 section 4.5: M set, length not a multiple of 8
	ReasonFragmentTooLong             // RFC 8200 section 4.5: reassembled past 65535 bytes
)

var reasonText = [...]string{
	"none", "extension header truncated", "option truncated", "too many extension headers",
	"extension header chain too long", "hop-by-hop header not first", "unknown routing type",
	"unknown option", "first fragment has incomplete header chain",
	"fragment length not a multiple of 8", "fragment reassembles past 65535 bytes",
}

// String names the reason.
func (r DropReason) String() string {
	if int(r) < len(reasonText) {
		return reasonText[r]
	}
	return "DropReason(" + strconv.Itoa(int(r)) + ")"
}

// ParamProblem is the ICMPv6 Parameter Problem a dropped datagram asks for
// (RFC 4443 section 3.4).
type ParamProblem struct {
	Code uint8
	// Pointer is the offset in the datagram, from the start of its IPv6
	// header, of the octet where the problem was found.
	Pointer uint32
}

// ToMulticast reports whether the error goes out even when the datagram
// was sent to a multicast address: RFC 4443 section 2.4 (e.3) excepts
// only code 2 for an option whose action bits are 10, and WalkChain asks
// for code 2 to a multicast destination in no other case. WalkChain does
// not apply section 2.4 (e) itself, which also covers link-layer
// multicast it cannot see: the sender of the error does.
func (p ParamProblem) ToMulticast() bool { return p.Code == wire.ICMPv6CodeUnrecognizedOpt }

// Fragment describes a Fragment header found in the chain (RFC 8200
// section 4.5).
type Fragment struct {
	At     int    // offset of the Fragment header in the datagram; 0 if none
	Offset int    // fragment offset in bytes
	More   bool   // the M flag
	ID     uint32 // identification
}

// Present reports whether the datagram carried a Fragment header; the
// fixed header takes offset 0, so no Fragment header can start there.
func (f Fragment) Present() bool { return f.At != 0 }

// Atomic reports an atomic fragment: offset 0 and M clear, a whole
// datagram that RFC 6946 section 4 has processed in isolation, not by
// reassembly.
func (f Fragment) Atomic() bool { return f.Present() && f.Offset == 0 && !f.More }

// First reports the first fragment of a fragmented datagram.
func (f Fragment) First() bool { return f.Present() && f.Offset == 0 && f.More }

// Chain is the result of walking a datagram's extension headers.
type Chain struct {
	Verdict Verdict
	Proto   uint8 // the upper-layer protocol (Deliver) or the fragmentable part's first header (Reassemble)
	Offset  int   // where that starts in the datagram
	// NextAt is the offset of the Next Header field that names Proto
	// (Deliver): a Parameter Problem for a protocol no one handles
	// points there (RFC 8200 section 4, RFC 4443 section 3.4 code 1).
	NextAt  int
	Frag    Fragment
	Problem ParamProblem // for SendParamProblem
	Reason  DropReason   // for Discard and SendParamProblem
}

func (c Chain) discard(r DropReason) Chain {
	c.Verdict, c.Reason = Discard, r
	return c
}

func (c Chain) paramProblem(r DropReason, code uint8, pointer int) Chain {
	c.Verdict, c.Reason = SendParamProblem, r
	c.Problem = ParamProblem{Code: code, Pointer: uint32(pointer)}
	return c
}

// truncated is the verdict on a chain that runs past the datagram: a
// silent drop, except in a first fragment, where RFC 7112 section 5 asks
// for Parameter Problem code 3 with the pointer set to zero.
func (c Chain) truncated() Chain {
	if c.Frag.First() {
		return c.paramProblem(ReasonIncompleteChain, wire.ICMPv6CodeIncompleteChain, 0)
	}
	return c.discard(ReasonTruncated)
}

// Offsets of the routing type and segments left in a Routing header (RFC
// 8200 section 4.4).
const (
	routingType         = 2
	routingSegmentsLeft = 3
)

// upperHeaderLen is the least a first fragment must carry of an upper-layer
// header for RFC 7112 section 5 to call its chain complete: the fixed
// header of the protocols the stack knows, one byte of any other.
func upperHeaderLen(proto uint8) int {
	switch proto {
	case wire.ProtoTCP:
		return 20 // RFC 9293 section 3.1, no options
	case wire.ProtoUDP:
		return 8 // RFC 768
	case wire.ProtoICMPv6:
		return wire.ICMPv6HeaderLen
	case wire.ProtoNoNext:
		return 0
	}
	return 1
}

// WalkChain walks the extension headers of d, a datagram as wire.ParseIPv6
// returns it, by RFC 8200 section 4 and says what to do with it. It
// recognises no option but Pad1 and PadN and no routing type: GoNet is a
// host, with no Jumbo Payload (RFC 2675) and no source routing.
func WalkChain(d wire.IPv6) Chain {
	var c Chain
	multicast := d.Dst().IsMulticast()
	next, nameAt, off := d.NextHeader(), ipv6NextHeaderField, wire.IPv6HeaderLen
	// inspect is cleared past the Fragment header of a first fragment:
	// the headers there are part of the fragmentable part, processed
	// after reassembly (RFC 8200 section 4.5), and only checked for
	// completeness now (RFC 7112 section 5).
	inspect := true
	for n := 0; ; n++ {
		switch next {
		case wire.ProtoHopByHop, wire.ProtoRouting, wire.ProtoDestOpts, wire.ProtoFragment:
		default:
			return c.end(d, next, nameAt, off, inspect)
		}
		if n == MaxExtHeaders {
			return c.discard(ReasonTooManyHeaders)
		}
		// RFC 8200 section 4.1: Hop-by-Hop Options only immediately
		// after the IPv6 header; elsewhere it is an unrecognized next
		// header, and the pointer names the field that named it.
		if next == wire.ProtoHopByHop && off != wire.IPv6HeaderLen {
			return c.paramProblem(ReasonHopByHopNotFirst, wire.ICMPv6CodeUnrecognizedNext, nameAt)
		}
		if next == wire.ProtoFragment {
			f, ok := wire.ParseIPv6Fragment(d[off:])
			if !ok {
				return c.truncated()
			}
			if off+wire.IPv6FragmentLen > MaxChainLen {
				return c.discard(ReasonChainTooLong)
			}
			if !inspect {
				// A second Fragment header in a first fragment's
				// fragmentable part is for after reassembly.
				next, nameAt, off = f.NextHeader(), off, off+wire.IPv6FragmentLen
				continue
			}
			c.Frag = Fragment{At: off, Offset: f.Offset(), More: f.MoreFragments(), ID: f.ID()}
			if r, ok := c.checkFragment(d, off); !ok {
				return r
			}
			next, nameAt, off = f.NextHeader(), off, off+wire.IPv6FragmentLen
			if c.Frag.Atomic() {
				continue
			}
			c.Verdict, c.Proto, c.Offset = Reassemble, next, off
			if c.Frag.Offset > 0 {
				// The rest is fragment data, not headers.
				return c
			}
			inspect = false
			continue
		}
		x, ok := wire.ParseIPv6ExtHdr(d[off:])
		if !ok {
			return c.truncated()
		}
		if off+x.Len() > MaxChainLen {
			return c.discard(ReasonChainTooLong)
		}
		if inspect {
			var r Chain
			switch next {
			case wire.ProtoRouting:
				r, ok = c.routing(x, off)
			default:
				r, ok = c.options(x, off, multicast)
			}
			if !ok {
				return r
			}
		}
		next, nameAt, off = x.NextHeader(), off, off+x.Len()
	}
}

// end is the verdict on a chain that reached a header that is not an
// extension header, next, at off, named by the field at nameAt.
func (c Chain) end(d wire.IPv6, next uint8, nameAt, off int, inspect bool) Chain {
	if !inspect {
		// RFC 7112 section 5: the first fragment must hold the whole
		// chain, through the upper-layer header.
		if off+upperHeaderLen(next) > len(d) {
			return c.truncated()
		}
		return c
	}
	if next == wire.ProtoNoNext {
		c.Verdict = NoNext
		return c
	}
	c.Verdict, c.Proto, c.Offset, c.NextAt = Deliver, next, off, nameAt
	return c
}

// checkFragment applies the checks of RFC 8200 section 4.5 that one
// fragment allows, for the Fragment header at off.
func (c Chain) checkFragment(d wire.IPv6, off int) (Chain, bool) {
	fragLen := len(d) - off - wire.IPv6FragmentLen
	if c.Frag.More && fragLen%8 != 0 {
		return c.paramProblem(ReasonBadFragmentLen, wire.ICMPv6CodeErroneousHeader, ipv6PayloadLenField), false
	}
	// The unfragmentable part's extension headers, then the fragment
	// at its offset, make the reassembled payload.
	if off-wire.IPv6HeaderLen+c.Frag.Offset+fragLen > wire.IPv6MaxPayloadLen {
		return c.paramProblem(ReasonFragmentTooLong, wire.ICMPv6CodeErroneousHeader, off+fragOffsetField), false
	}
	return c, true
}

// Offsets of the fields a Parameter Problem points at (RFC 8200 sections
// 3, 4.2 and 4.5).
const (
	ipv6PayloadLenField = 4 // in the IPv6 header
	ipv6NextHeaderField = 6 // in the IPv6 header
	fragOffsetField     = 2 // in the Fragment header
	optionsField        = 2 // the first option, after next header and length
)

// routing applies RFC 8200 section 4.4 to the Routing header x at off. No
// routing type is recognised; type 0 is deprecated by RFC 5095 section 3,
// which asks that it be treated as unrecognised, so it takes the same path.
func (c Chain) routing(x wire.IPv6ExtHdr, off int) (Chain, bool) {
	if x[routingSegmentsLeft] == 0 {
		return c, true // ignore the header and go on
	}
	return c.paramProblem(ReasonUnknownRouting, wire.ICMPv6CodeErroneousHeader, off+routingType), false
}

// options applies RFC 8200 section 4.2 to the Hop-by-Hop or Destination
// Options header x at off. Padding is not checked for content: the RFC
// asks for none, and RFC 8504 section 5.3 leaves such limits optional.
func (c Chain) options(x wire.IPv6ExtHdr, off int, multicast bool) (Chain, bool) {
	opts, ok := wire.ParseIPv6Options(x.Data())
	if !ok {
		return c.discard(ReasonBadOptions), false
	}
	at := off + optionsField
	for len(opts) > 0 {
		var o wire.IPv6Option
		o, opts = opts.Next()
		if t := o.Type(); t != wire.IPv6OptPad1 && t != wire.IPv6OptPadN {
			switch o.Action() {
			case wire.IPv6OptDiscard:
				return c.discard(ReasonUnknownOption), false
			case wire.IPv6OptDiscardICMP:
				return c.paramProblem(ReasonUnknownOption, wire.ICMPv6CodeUnrecognizedOpt, at), false
			case wire.IPv6OptDiscardICMPUnicast:
				if multicast {
					return c.discard(ReasonUnknownOption), false
				}
				return c.paramProblem(ReasonUnknownOption, wire.ICMPv6CodeUnrecognizedOpt, at), false
			}
		}
		at += o.Len()
	}
	return c, true
}
