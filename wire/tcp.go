package wire

import "net/netip"

// TCP header constants (RFC 9293 section 3.1).
const (
	TCPMinHeaderLen  = 20
	TCPMaxHeaderLen  = 60
	TCPMaxOptionsLen = TCPMaxHeaderLen - TCPMinHeaderLen
)

// TCP header layout (RFC 9293 section 3.1): the offset of each field.
const (
	tcpSrcPort  = 0  // 2 bytes
	tcpDstPort  = 2  // 2 bytes
	tcpSeq      = 4  // sequence number, 4 bytes
	tcpAck      = 8  // acknowledgment number, 4 bytes
	tcpDataOff  = 12 // data offset in 32-bit words (high 4 bits), reserved (low 4)
	tcpFlags    = 13 // control bits, 1 byte
	tcpWindow   = 14 // 2 bytes
	tcpChecksum = 16 // 2 bytes
	tcpUrgent   = 18 // urgent pointer, 2 bytes
	tcpOptions  = TCPMinHeaderLen
)

// TCP control bits, as they sit in the header's control bits byte (RFC 9293
// section 3.1; ECE and CWR from RFC 3168).
const (
	TCPFlagFIN = 0x01
	TCPFlagSYN = 0x02
	TCPFlagRST = 0x04
	TCPFlagPSH = 0x08
	TCPFlagACK = 0x10
	TCPFlagURG = 0x20
	TCPFlagECE = 0x40
	TCPFlagCWR = 0x80
)

// TCP option kinds: RFC 9293 section 3.2 (EOL, NOP, MSS), RFC 7323 (window
// scale, timestamps), RFC 2018 (SACK).
const (
	TCPOptionEOL           = 0
	TCPOptionNOP           = 1
	TCPOptionMSS           = 2
	TCPOptionWScale        = 3
	TCPOptionSACKPermitted = 4
	TCPOptionSACK          = 5
	TCPOptionTimestamp     = 8
)

// Option layout (RFC 9293 section 3.2): a kind byte; for kinds other than
// EOL and NOP, a length byte counting kind and length; then the data.
const (
	tcpOptLength = 1
	tcpOptData   = 2
)

// Option lengths, kind and length bytes included.
const (
	tcpOptMSSLen       = 4
	tcpOptWScaleLen    = 3
	tcpOptSACKPermLen  = 2
	tcpOptTimestampLen = 10
	tcpOptSACKBaseLen  = tcpOptData
	tcpSACKBlockLen    = 8
)

// TCPMaxWScale is the largest window scale shift RFC 7323 section 2.3
// allows. ParseTCPOptions reports larger values as they arrived; the
// receiver "MUST use 14 instead".
const TCPMaxWScale = 14

// TCPMaxSACKBlocks is the most SACK blocks 40 bytes of options can carry
// (RFC 2018 section 3).
const TCPMaxSACKBlocks = (TCPMaxOptionsLen - tcpOptSACKBaseLen) / tcpSACKBlockLen

// TCP is a view of a TCP segment: header, options and payload.
type TCP []byte

// ParseTCP checks that b holds a whole TCP header, its data offset no
// shorter than the fixed header and no longer than what arrived, and returns
// the segment. The checksum is left to ChecksumValid, which needs the
// addresses.
func ParseTCP(b []byte) (TCP, bool) {
	if len(b) < TCPMinHeaderLen {
		return nil, false
	}
	off := TCP(b).DataOffset()
	if off < TCPMinHeaderLen || off > len(b) {
		return nil, false
	}
	return TCP(b), true
}

// SrcPort returns the source port.
func (t TCP) SrcPort() uint16 { return be.Uint16(t[tcpSrcPort : tcpSrcPort+2]) }

// DstPort returns the destination port.
func (t TCP) DstPort() uint16 { return be.Uint16(t[tcpDstPort : tcpDstPort+2]) }

// Seq returns the sequence number.
func (t TCP) Seq() uint32 { return be.Uint32(t[tcpSeq : tcpSeq+4]) }

// Ack returns the acknowledgment number.
func (t TCP) Ack() uint32 { return be.Uint32(t[tcpAck : tcpAck+4]) }

// DataOffset returns the header length in bytes, options included.
func (t TCP) DataOffset() int { return int(t[tcpDataOff]>>4) * 4 }

// Flags returns the eight control bits, CWR to FIN. The reserved bits in
// the data offset byte are not among them.
func (t TCP) Flags() uint8 { return t[tcpFlags] }

// Window returns the window field, unscaled.
func (t TCP) Window() uint16 { return be.Uint16(t[tcpWindow : tcpWindow+2]) }

// Checksum returns the checksum field.
func (t TCP) Checksum() uint16 { return be.Uint16(t[tcpChecksum : tcpChecksum+2]) }

// Urgent returns the urgent pointer.
func (t TCP) Urgent() uint16 { return be.Uint16(t[tcpUrgent : tcpUrgent+2]) }

// Options returns the option bytes between the fixed header and the data.
func (t TCP) Options() []byte { return t[tcpOptions:t.DataOffset()] }

// Payload returns the data after the header.
func (t TCP) Payload() []byte { return t[t.DataOffset():] }

// ChecksumValid reports whether the checksum over the pseudo-header of
// src's family (IPv4's or IPv6's) and the whole segment is right. Unlike UDP's, a TCP checksum is never optional
// (RFC 9293 section 3.1).
func (t TCP) ChecksumValid(src, dst netip.Addr) bool {
	return Checksum(t, PseudoHeaderSum(src, dst, ProtoTCP, len(t))) == 0
}

// SACKBlock is one block of a SACK option (RFC 2018 section 3): the data
// from Start up to but not including End has been received.
type SACKBlock struct{ Start, End uint32 }

// TCPOptions holds the options GoNet understands, parsed or to encode.
type TCPOptions struct {
	MSS           uint16 // 0: absent
	WScale        uint8  // valid when HasWScale
	HasWScale     bool
	SACKPermitted bool
	HasTimestamp  bool
	TSVal, TSEcr  uint32
	// SACK holds up to TCPMaxSACKBlocks blocks. ParseTCPOptions appends
	// to SACK[:0], so a caller that points it at an array of its own
	// parses without allocating.
	SACK []SACKBlock
}

// ParseTCPOptions fills o from the option bytes b, such as TCP.Options
// returns. It resets o first, keeping the SACK slice's backing array, and
// never panics.
//
// It returns false for malformed options: a length byte below 2 or running
// past the end, an MSS, window scale, SACK-permitted or timestamps option of
// the wrong length, or a SACK option whose length is not 2+8n. RFC 9293
// section 3.2 says a TCP "MUST be prepared to handle an illegal option
// length"; the caller decides what to do with the segment, and o keeps
// what was parsed before the fault. Options of other kinds are skipped by
// their length; EOL ends the list. An option that appears twice takes its
// last value, as Linux does, and SACK blocks from every SACK option are
// kept, up to TCPMaxSACKBlocks (more can come only from an option area
// longer than a header holds).
func ParseTCPOptions(b []byte, o *TCPOptions) bool {
	*o = TCPOptions{SACK: o.SACK[:0]}
	for i := 0; i < len(b); {
		kind := b[i]
		switch kind {
		case TCPOptionEOL:
			return true
		case TCPOptionNOP:
			i++
			continue
		}
		if i+tcpOptLength >= len(b) {
			return false
		}
		l := int(b[i+tcpOptLength])
		if l < tcpOptData || l > len(b)-i {
			return false
		}
		opt := b[i : i+l]
		switch kind {
		case TCPOptionMSS:
			if l != tcpOptMSSLen {
				return false
			}
			o.MSS = be.Uint16(opt[tcpOptData : tcpOptData+2])
		case TCPOptionWScale:
			if l != tcpOptWScaleLen {
				return false
			}
			o.WScale, o.HasWScale = opt[tcpOptData], true
		case TCPOptionSACKPermitted:
			if l != tcpOptSACKPermLen {
				return false
			}
			o.SACKPermitted = true
		case TCPOptionSACK:
			if (l-tcpOptSACKBaseLen)%tcpSACKBlockLen != 0 {
				return false
			}
			for j := tcpOptSACKBaseLen; j < l && len(o.SACK) < TCPMaxSACKBlocks; j += tcpSACKBlockLen {
				o.SACK = append(o.SACK, SACKBlock{be.Uint32(opt[j : j+4]), be.Uint32(opt[j+4 : j+8])})
			}
		case TCPOptionTimestamp:
			if l != tcpOptTimestampLen {
				return false
			}
			o.HasTimestamp = true
			o.TSVal, o.TSEcr = be.Uint32(opt[tcpOptData:tcpOptData+4]), be.Uint32(opt[tcpOptData+4:tcpOptData+4+4])
		}
		i += l
	}
	return true
}

// tcpOptionsLen returns the length of the options o describes without SACK
// blocks, and how many of o's SACK blocks fit alongside them in 40 bytes.
func tcpOptionsLen(o *TCPOptions) (n, blocks int) {
	if o.MSS != 0 {
		n += 4
	}
	if o.HasTimestamp {
		n += 12 // SACK-permitted, if wanted, rides in the timestamps word
	} else if o.SACKPermitted {
		n += 4
	}
	if o.HasWScale {
		n += 4
	}
	if len(o.SACK) > 0 {
		// RFC 2018 section 4: the first block reports the latest data, so
		// when space runs short the blocks at the end are the ones dropped.
		blocks = min(len(o.SACK), (TCPMaxOptionsLen-n-4)/tcpSACKBlockLen)
	}
	return n, blocks
}

// TCPOptionsLen returns the number of bytes EncodeTCPOptions writes for o: a
// multiple of 4, at most TCPMaxOptionsLen.
func TCPOptionsLen(o *TCPOptions) int {
	n, blocks := tcpOptionsLen(o)
	if blocks > 0 {
		n += 4 + blocks*tcpSACKBlockLen
	}
	return n
}

// EncodeTCPOptions writes o into b in the layout Linux uses, each option
// led by NOPs to a 4-byte boundary: MSS; timestamps as NOP,NOP,TS, or as
// SACK-permitted,TS when both are wanted (otherwise SACK-permitted as
// NOP,NOP,SACK-permitted); window scale as NOP,WS; SACK blocks as
// NOP,NOP,SACK. Every option then ends on a word boundary and no padding is
// needed. It returns the length, TCPOptionsLen(o), for which b must have
// room. The options never pass 40 bytes: SACK blocks are dropped from the
// end of o.SACK until they fit.
func EncodeTCPOptions(b []byte, o *TCPOptions) int {
	_, blocks := tcpOptionsLen(o)
	n := 0
	if o.MSS != 0 {
		b[n], b[n+1] = TCPOptionMSS, tcpOptMSSLen
		be.PutUint16(b[n+tcpOptData:n+tcpOptData+2], o.MSS)
		n += 4
	}
	if o.HasTimestamp {
		if o.SACKPermitted {
			b[n], b[n+1] = TCPOptionSACKPermitted, tcpOptSACKPermLen
		} else {
			b[n], b[n+1] = TCPOptionNOP, TCPOptionNOP
		}
		b[n+2], b[n+3] = TCPOptionTimestamp, tcpOptTimestampLen
		be.PutUint32(b[n+4:n+8], o.TSVal)
		be.PutUint32(b[n+8:n+12], o.TSEcr)
		n += 12
	} else if o.SACKPermitted {
		b[n], b[n+1], b[n+2], b[n+3] = TCPOptionNOP, TCPOptionNOP, TCPOptionSACKPermitted, tcpOptSACKPermLen
		n += 4
	}
	if o.HasWScale {
		b[n], b[n+1], b[n+2], b[n+3] = TCPOptionNOP, TCPOptionWScale, tcpOptWScaleLen, o.WScale
		n += 4
	}
	if blocks > 0 {
		b[n], b[n+1], b[n+2], b[n+3] = TCPOptionNOP, TCPOptionNOP, TCPOptionSACK, byte(tcpOptSACKBaseLen+blocks*tcpSACKBlockLen)
		n += 4
		for _, s := range o.SACK[:blocks] {
			be.PutUint32(b[n:n+4], s.Start)
			be.PutUint32(b[n+4:n+8], s.End)
			n += 8
		}
	}
	return n
}

// TCPFields describes the fixed part of a TCP header to encode.
type TCPFields struct {
	SrcPort, DstPort uint16
	Seq, Ack         uint32
	Flags            uint8 // TCPFlagFIN ... TCPFlagCWR
	Window           uint16
	Urgent           uint16
	// OptionsLen is the length of the options that follow the fixed
	// header, a multiple of 4 such as EncodeTCPOptions returns.
	OptionsLen int
}

// EncodeTCP writes the fixed header f describes into b[:TCPMinHeaderLen],
// with a data offset of TCPMinHeaderLen+f.OptionsLen, zero reserved bits and
// a zero checksum. The options belong at b[TCPMinHeaderLen:][:f.OptionsLen],
// written before or after with EncodeTCPOptions; SetTCPChecksum or
// SetTCPPartialChecksum finishes the segment.
func EncodeTCP(b []byte, f *TCPFields) {
	_ = b[TCPMinHeaderLen-1]
	be.PutUint16(b[tcpSrcPort:tcpSrcPort+2], f.SrcPort)
	be.PutUint16(b[tcpDstPort:tcpDstPort+2], f.DstPort)
	be.PutUint32(b[tcpSeq:tcpSeq+4], f.Seq)
	be.PutUint32(b[tcpAck:tcpAck+4], f.Ack)
	b[tcpDataOff] = byte((TCPMinHeaderLen+f.OptionsLen)/4) << 4
	b[tcpFlags] = f.Flags
	be.PutUint16(b[tcpWindow:tcpWindow+2], f.Window)
	b[tcpChecksum], b[tcpChecksum+1] = 0, 0
	be.PutUint16(b[tcpUrgent:tcpUrgent+2], f.Urgent)
}

// SetTCPChecksum computes the checksum of the segment b, header, options and
// payload, over the pseudo-header of src and dst (IPv4's or IPv6's, by
// their family), and stores it.
func SetTCPChecksum(b []byte, src, dst netip.Addr) {
	b[tcpChecksum], b[tcpChecksum+1] = 0, 0
	be.PutUint16(b[tcpChecksum:tcpChecksum+2], Checksum(b, PseudoHeaderSum(src, dst, ProtoTCP, len(b))))
}
