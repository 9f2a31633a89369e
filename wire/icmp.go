package wire

// ICMPv4 types and codes (RFC 792) the stack sends or answers.
const (
	ICMPEchoReply      = 0
	ICMPDestUnreach    = 3
	ICMPRedirect       = 5
	ICMPEchoRequest    = 8
	ICMPTimeExceeded   = 11
	ICMPParamProblem   = 12
	ICMPHeaderLen      = 8
	ICMPCodeNetUnrch   = 0
	ICMPCodeHostUnrch  = 1
	ICMPCodeProtoUnrch = 2
	ICMPCodePortUnrch  = 3
	ICMPCodeFragNeeded = 4
	ICMPCodeTTL        = 0 // time to live exceeded in transit
	ICMPCodeReassembly = 1 // fragment reassembly time exceeded
	// ICMPCodeAdminProhibited is destination unreachable's
	// "communication administratively prohibited" (RFC 1812 section
	// 5.2.7.1), which a router's filter sends.
	ICMPCodeAdminProhibited = 13
)

// ICMP header layout (RFC 792): the offset of each field. The last word,
// the rest of the header, holds an echo message's identifier and sequence
// number, a parameter problem's pointer, or a next-hop MTU (RFC 1191).
const (
	icmpType     = 0 // 1 byte
	icmpCode     = 1 // 1 byte
	icmpChecksum = 2 // 2 bytes
	icmpRest     = 4 // 4 bytes
	icmpIdent    = 4 // echo identifier, 2 bytes
	icmpSeq      = 6 // echo sequence number, 2 bytes
)

// ICMP is a view of an ICMPv4 message.
type ICMP []byte

// ParseICMP checks that b holds an ICMP header and that the checksum over the
// whole message is right.
func ParseICMP(b []byte) (ICMP, bool) {
	if len(b) < ICMPHeaderLen || Checksum(b, 0) != 0 {
		return nil, false
	}
	return ICMP(b), true
}

// Type returns the message type.
func (m ICMP) Type() uint8 { return m[icmpType] }

// Code returns the message code.
func (m ICMP) Code() uint8 { return m[icmpCode] }

// Checksum returns the checksum field.
func (m ICMP) Checksum() uint16 { return be.Uint16(m[icmpChecksum : icmpChecksum+2]) }

// Ident returns an echo message's identifier.
func (m ICMP) Ident() uint16 { return be.Uint16(m[icmpIdent : icmpIdent+2]) }

// Seq returns an echo message's sequence number.
func (m ICMP) Seq() uint16 { return be.Uint16(m[icmpSeq : icmpSeq+2]) }

// RestOfHeader returns the header's last word (unused, pointer, or next-hop
// MTU).
func (m ICMP) RestOfHeader() uint32 { return be.Uint32(m[icmpRest : icmpRest+4]) }

// Payload returns what follows the 8-byte header: echo data, or the quoted
// datagram of an error.
func (m ICMP) Payload() []byte { return m[ICMPHeaderLen:] }

// ICMPFields describes an ICMP header to encode.
type ICMPFields struct {
	Type, Code uint8
	Rest       uint32 // the rest of the header: see EchoRest for echo messages
}

// EncodeICMP writes the header f describes into b[:ICMPHeaderLen] and
// computes the checksum over all of b, the message: its payload must be in
// place first.
func EncodeICMP(b []byte, f *ICMPFields) {
	b[icmpType], b[icmpCode] = f.Type, f.Code
	b[icmpChecksum], b[icmpChecksum+1] = 0, 0
	be.PutUint32(b[icmpRest:icmpRest+4], f.Rest)
	be.PutUint16(b[icmpChecksum:icmpChecksum+2], Checksum(b, 0))
}

// EchoRest packs an echo message's identifier and sequence number into the
// rest-of-header word.
func EchoRest(ident, seq uint16) uint32 { return uint32(ident)<<16 | uint32(seq) }
