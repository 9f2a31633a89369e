package wire

import "strings"

// Domain names as DNS messages carry them (RFC 1035 section 3.1), without
// compression: a length byte and the bytes of each label, then the root's
// zero. RFC 8106's DNS Search List option and RFC 8415's Domain Search
// List option (RFC 3646 section 4) carry lists of them so.

const (
	// maxDomainLen bounds a domain name's encoding, its labels' length
	// bytes and the root's zero included.
	maxDomainLen = 255
	maxLabelLen  = 63
)

// DomainNames decodes a list of uncompressed domain names, each a dotted
// name without the trailing dot; zero bytes where a name would start are
// padding to the end, as RFC 8106's option pads. It reports false for a
// name that is compressed (a length of 64 or more), too long, has a dot
// inside a label (which could not be told from one between labels), or
// runs off the end, or for padding that is not all zeros.
func DomainNames(b []byte) ([]string, bool) {
	var names []string
	for len(b) > 0 && b[0] != 0 {
		var name []byte
		enc := 1 // the root's zero
		for {
			if len(b) == 0 {
				return nil, false // no root label
			}
			l := int(b[0])
			if l == 0 {
				b = b[1:]
				break
			}
			enc += 1 + l
			if l > maxLabelLen || 1+l > len(b) || enc > maxDomainLen || strings.IndexByte(string(b[1:1+l]), '.') >= 0 {
				return nil, false
			}
			if len(name) > 0 {
				name = append(name, '.')
			}
			name = append(name, b[1:1+l]...)
			b = b[1+l:]
		}
		names = append(names, string(name))
	}
	for _, c := range b {
		if c != 0 {
			return nil, false
		}
	}
	return names, true
}

// AppendDomainName appends name, dotted, without the trailing dot, its
// labels 1 to 63 bytes, as RFC 1035 section 3.1 encodes it.
func AppendDomainName(b []byte, name string) []byte {
	for label := range strings.SplitSeq(name, ".") {
		b = append(append(b, uint8(len(label))), label...)
	}
	return append(b, 0)
}

// DomainNameLen is the length of name's encoding.
func DomainNameLen(name string) int { return len(name) + 2 }
