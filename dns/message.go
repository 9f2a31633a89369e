package dns

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	mdns "github.com/miekg/dns"
)

// The wire format is RFC 1035 section 4.1; github.com/miekg/dns parses and
// validates it, and builds the replies the forwarder makes up itself
// (FORMERR, SERVFAIL, REFUSED, a truncated answer). Everything else the
// forwarder relays as the bytes it was given, so what it does not
// understand (a new record type, an EDNS option) passes through untouched.

// headerLen is the fixed header of every message (RFC 1035 4.1.1).
const headerLen = 12

// Field offsets and bits of the header (RFC 1035 4.1.1).
const (
	offID    = 0
	offFlags = 2
	flagQR   = 0x8000 // a response
	flagRD   = 0x0100 // recursion desired
	flagCD   = 0x0010 // checking disabled (RFC 4035 3.2.2)
)

// minUDPSize is the UDP payload every client takes (RFC 1035 4.2.1), and
// the least an EDNS0 client may advertise (RFC 6891 6.2.5).
const minUDPSize = 512

// maxMessage is the largest message TCP's two-byte length can frame
// (RFC 1035 4.2.2).
const maxMessage = 65535

var (
	errShort    = errors.New("shorter than a DNS header")
	errResponse = errors.New("a response, not a query")
	errQDCount  = errors.New("not exactly one question")
)

// query is a guest's query, parsed: the bytes to relay and what the
// answer must match.
type query struct {
	raw      []byte
	id       uint16
	question mdns.Question
	// udpSize is the largest UDP answer the client takes: 512, or its
	// EDNS0 payload size (RFC 6891 6.2.3).
	udpSize int
}

// parseQuery checks that b is a query the forwarder relays: a whole
// message that parses, not a response, with exactly one question (RFC 9619
// for QUERY; the other opcodes in use have one too).
func parseQuery(b []byte) (*query, error) {
	if len(b) < headerLen {
		return nil, errShort
	}
	if binary.BigEndian.Uint16(b[offFlags:])&flagQR != 0 {
		return nil, errResponse
	}
	var m mdns.Msg
	if err := m.Unpack(b); err != nil {
		return nil, err
	}
	if len(m.Question) != 1 {
		return nil, errQDCount
	}
	q := &query{raw: b, id: m.Id, question: m.Question[0], udpSize: minUDPSize}
	if opt := m.IsEdns0(); opt != nil {
		q.udpSize = max(int(opt.UDPSize()), minUDPSize)
	}
	return q, nil
}

// checkAnswer parses b and reports whether it answers q as sent upstream
// under id: a response with that ID and either q's question (RFC 5452
// section 9.1: anything else is discarded) or none, as an upstream's
// FORMERR may carry.
func checkAnswer(b []byte, q *query, id uint16) (*mdns.Msg, error) {
	var m mdns.Msg
	if err := m.Unpack(b); err != nil {
		return nil, fmt.Errorf("answer does not parse: %w", err)
	}
	switch {
	case !m.Response:
		return nil, errors.New("answer is not a response")
	case m.Id != id:
		return nil, fmt.Errorf("answer has ID %d, the query %d", m.Id, id)
	case len(m.Question) > 1:
		return nil, errors.New("answer has more than one question")
	case len(m.Question) == 1 && !sameQuestion(m.Question[0], q.question):
		return nil, fmt.Errorf("answer is for %v, the query for %v", m.Question[0].String(), q.question.String())
	}
	return &m, nil
}

// sameQuestion compares questions with names case-insensitively (RFC 4343);
// an upstream may echo 0x20-randomised case back.
func sameQuestion(a, b mdns.Question) bool {
	return a.Qtype == b.Qtype && a.Qclass == b.Qclass && strings.EqualFold(a.Name, b.Name)
}

// setID writes id into the header of message b.
func setID(b []byte, id uint16) { binary.BigEndian.PutUint16(b[offID:], id) }

// errorReply builds a reply to query b with rcode and no records: the
// question when b has one that parses, and an OPT record when b had one
// (RFC 6891 7). It returns nil when b is not even a header, or is itself a
// response (answering responses risks loops between two servers).
func errorReply(b []byte, rcode int) []byte {
	if len(b) < headerLen || binary.BigEndian.Uint16(b[offFlags:])&flagQR != 0 {
		return nil
	}
	var req mdns.Msg
	if err := req.Unpack(b); err != nil {
		// Only the header is trustworthy: answer with it alone
		// (RFC 1035 4.1.1, format error).
		flags := binary.BigEndian.Uint16(b[offFlags:])
		req = mdns.Msg{MsgHdr: mdns.MsgHdr{
			Id:               binary.BigEndian.Uint16(b[offID:]),
			Opcode:           int(flags>>11) & 0xF,
			RecursionDesired: flags&flagRD != 0,
			CheckingDisabled: flags&flagCD != 0,
		}}
	}
	var m mdns.Msg
	m.Id = req.Id
	m.Opcode = req.Opcode
	m.RecursionDesired = req.RecursionDesired
	m.CheckingDisabled = req.CheckingDisabled
	m.Response = true
	m.RecursionAvailable = true
	m.Rcode = rcode
	if len(req.Question) == 1 {
		m.Question = req.Question
	}
	if opt := req.IsEdns0(); opt != nil && rcode <= 0xF {
		m.SetEdns0(max(opt.UDPSize(), minUDPSize), false)
	}
	out, err := m.Pack()
	if err != nil {
		return nil
	}
	return out
}

// truncated builds the answer a UDP client gets when the upstream's answer
// m is larger than the client takes (RFC 1035 4.2.1, RFC 2181 section 9):
// the header with TC set, the question, and the OPT record, no other
// records, so the client retries over TCP (RFC 7766 section 5).
func truncated(m *mdns.Msg) ([]byte, error) {
	t := m.Copy()
	t.Truncated = true
	t.Answer, t.Ns = nil, nil
	var extra []mdns.RR
	if opt := m.IsEdns0(); opt != nil {
		extra = []mdns.RR{opt}
	}
	t.Extra = extra
	return t.Pack()
}
