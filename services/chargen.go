package services

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"
)

// The RFC 864 pattern: "72 character lines of the ASCII printing
// characters. [...] On line N, put characters (0+N mod 95) through (71+N mod
// 95). End each line with carriage return and line feed."
const (
	// ChargenLineLen is the length of one pattern line, CRLF included.
	ChargenLineLen = chargenChars + 2
	// ChargenLines is the number of distinct lines: line 95 is line 0 again,
	// so the stream repeats every ChargenLines*ChargenLineLen bytes.
	ChargenLines = 95

	chargenChars  = 72  // printing characters per line
	chargenFirst  = ' ' // character number 0: the printing characters are 0x20..0x7e
	chargenPeriod = ChargenLines * ChargenLineLen
	// chargenMaxUDP is the RFC's bound on an answering datagram: "a random
	// number (between 0 and 512) of characters".
	chargenMaxUDP = 512
)

// chargenCycle is one whole period of the stream, built once, so that
// producing the stream is a copy rather than arithmetic per byte.
var chargenCycle = sync.OnceValue(func() []byte {
	b := make([]byte, 0, chargenPeriod)
	for n := range ChargenLines {
		b = append(b, ChargenLine(n)...)
	}
	return b
})

// ChargenLine returns line n of the RFC 864 pattern, CRLF included.
func ChargenLine(n int) []byte {
	n %= ChargenLines
	if n < 0 {
		n += ChargenLines
	}
	line := make([]byte, 0, ChargenLineLen)
	for i := range chargenChars {
		line = append(line, byte(chargenFirst+(n+i)%ChargenLines))
	}
	return append(line, '\r', '\n')
}

// Chargen produces the RFC 864 stream: the pattern's lines one after the
// other, without end. Its zero value starts at line 0. TCP's character
// generator sends what Read produces; UDP's answers each datagram with a
// piece of it.
type Chargen struct {
	off int // offset in chargenCycle of the next byte
}

// NewChargen returns a Chargen whose stream starts at the beginning of line n.
func NewChargen(line int) *Chargen {
	line %= ChargenLines
	if line < 0 {
		line += ChargenLines
	}
	return &Chargen{off: line * ChargenLineLen}
}

// Read fills p with the next len(p) bytes of the stream. It never fails.
func (c *Chargen) Read(p []byte) (int, error) {
	cycle := chargenCycle()
	n := 0
	for n < len(p) {
		k := copy(p[n:], cycle[c.off:])
		n += k
		c.off = (c.off + k) % chargenPeriod
	}
	return n, nil
}

// ServeChargenUDP runs the UDP character generator service (RFC 864) on
// conn: each datagram received, whatever it holds, is answered with a
// datagram of between 0 and 512 characters of the pattern. Successive
// answers start on successive lines, so a client sees the pattern rotate as
// it would over TCP; the RFC asks for no continuity beyond that. It returns
// as ServeEchoUDP does.
func ServeChargenUDP(ctx context.Context, conn net.PacketConn) error {
	var next int // line the next answer starts on
	reply := make([]byte, chargenMaxUDP)
	return serveUDP(ctx, "chargen", conn, func([]byte, net.Addr) []byte {
		b := reply[:rand.IntN(chargenMaxUDP+1)]
		NewChargen(next).Read(b)
		next = (next + 1) % ChargenLines
		return b
	})
}
