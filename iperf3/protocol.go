// Package iperf3 speaks the protocol of ESnet's iperf3, the tool network
// engineers measure bandwidth, loss and jitter with: a server that the
// stock iperf3 client drives (TCP and UDP, reverse mode, parallel streams,
// a target rate, a block length), and a client that drives the stock
// server. Both are written against the standard library's interfaces
// (net.Listener, net.PacketConn, a dial function), so they run over
// GoNet's stack and, in tests, over the kernel's.
//
// iperf3 has no RFC; its protocol is what iperf3's own sources (3.x)
// implement, and this package follows the stock tool's behaviour as its
// users see it:
//
//   - The client opens a control connection to port 5201 and sends a
//     37-byte cookie (36 characters and a NUL) that names the test.
//   - The server drives the test with one-byte state messages
//     (PARAM_EXCHANGE, CREATE_STREAMS, TEST_START, TEST_RUNNING,
//     EXCHANGE_RESULTS, DISPLAY_RESULTS); the client answers with its
//     own (TEST_END, IPERF_DONE, CLIENT_TERMINATE).
//   - Parameters and results cross the control connection as JSON
//     framed by a 4-byte big-endian length.
//   - Each TCP data stream is a connection to the same port that begins
//     with the cookie; each UDP one begins with a 4-byte hello datagram
//     from the client that the server answers, so that both ends know
//     each other's address.
//   - UDP data datagrams begin with the sender's clock (seconds and
//     microseconds) and a packet count, from which the receiver computes
//     loss, reordering and jitter.
//
// The server runs one test at a time, as iperf3's does: a client that
// comes while a test runs is told ACCESS_DENIED.
package iperf3

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// Port is iperf3's well-known port, for the control connection and the
// data streams alike.
const Port = 5201

// State is a one-byte control message: the state the sender moves the
// test to. iperf3 sends it as a signed char.
type State int8

// The states that cross the control connection. The values are iperf3's
// (iperf_api.h); 3, 5..8 and 15 are defined there but never sent.
const (
	TestStart       State = 1
	TestRunning     State = 2
	TestEnd         State = 4
	ParamExchange   State = 9
	CreateStreams   State = 10
	ServerTerminate State = 11
	ClientTerminate State = 12
	ExchangeResults State = 13
	DisplayResults  State = 14
	IperfDone       State = 16
	AccessDenied    State = -1
	ServerError     State = -2
)

var stateNames = map[State]string{
	TestStart:       "TEST_START",
	TestRunning:     "TEST_RUNNING",
	TestEnd:         "TEST_END",
	ParamExchange:   "PARAM_EXCHANGE",
	CreateStreams:   "CREATE_STREAMS",
	ServerTerminate: "SERVER_TERMINATE",
	ClientTerminate: "CLIENT_TERMINATE",
	ExchangeResults: "EXCHANGE_RESULTS",
	DisplayResults:  "DISPLAY_RESULTS",
	IperfDone:       "IPERF_DONE",
	AccessDenied:    "ACCESS_DENIED",
	ServerError:     "SERVER_ERROR",
}

// String returns iperf3's name for the state, or its number.
func (s State) String() string {
	if n, ok := stateNames[s]; ok {
		return n
	}
	return fmt.Sprintf("state(%d)", int8(s))
}

// writeState sends one state message.
func writeState(w io.Writer, s State) error {
	if _, err := w.Write([]byte{byte(s)}); err != nil {
		return fmt.Errorf("iperf3: sending %v: %w", s, err)
	}
	return nil
}

// readState reads one state message.
func readState(r io.Reader) (State, error) {
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, fmt.Errorf("iperf3: reading a state message: %w", err)
	}
	return State(int8(b[0])), nil
}

// CookieSize is the length of the cookie that names a test: an ASCII
// string of 36 characters and its terminating NUL.
const CookieSize = 37

// Cookie names a test on its control connection and each of its TCP
// streams.
type Cookie [CookieSize]byte

// cookieAlphabet is the 32 characters iperf3 draws its cookies from.
const cookieAlphabet = "abcdefghijklmnopqrstuvwxyz234567"

// NewCookie returns a fresh random cookie.
func NewCookie() Cookie {
	var c Cookie
	rand.Read(c[:CookieSize-1])
	for i := range CookieSize - 1 {
		c[i] = cookieAlphabet[c[i]%32]
	}
	return c
}

// String returns the cookie's text without its NUL.
func (c Cookie) String() string { return string(c[:CookieSize-1]) }

// readCookie reads the cookie a control connection or TCP stream begins
// with.
func readCookie(r io.Reader) (Cookie, error) {
	var c Cookie
	if _, err := io.ReadFull(r, c[:]); err != nil {
		return c, fmt.Errorf("iperf3: reading the cookie: %w", err)
	}
	return c, nil
}

// maxJSON bounds a JSON message's announced length, so that a peer
// cannot make the reader allocate gigabytes: iperf3's parameters and
// results are a few hundred bytes per stream; a server's text output
// (get_server_output) is the only large one.
const maxJSON = 1 << 20

// errJSONTooLong is a frame whose length exceeds maxJSON.
var errJSONTooLong = errors.New("JSON message longer than 1 MiB")

// writeJSON sends v as iperf3 frames JSON: its length as a 4-byte
// big-endian number, then the text, in one write so that the two do not
// cross the network in separate segments.
func writeJSON(w io.Writer, what string, v any) error {
	text, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("iperf3: encoding the %s: %w", what, err)
	}
	frame := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(text)), uint32(len(text)))
	if _, err := w.Write(append(frame, text...)); err != nil {
		return fmt.Errorf("iperf3: sending the %s: %w", what, err)
	}
	return nil
}

// readJSON reads one length-framed JSON message into v.
func readJSON(r io.Reader, what string, v any) error {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return fmt.Errorf("iperf3: reading the %s: %w", what, err)
	}
	size := binary.BigEndian.Uint32(n[:])
	if size > maxJSON {
		return fmt.Errorf("iperf3: reading the %s: %w (%d bytes)", what, errJSONTooLong, size)
	}
	text := make([]byte, size)
	if _, err := io.ReadFull(r, text); err != nil {
		return fmt.Errorf("iperf3: reading the %s: %w", what, err)
	}
	if err := json.Unmarshal(text, v); err != nil {
		return fmt.Errorf("iperf3: decoding the %s: %w", what, err)
	}
	return nil
}

// Params are the test parameters the client sends after PARAM_EXCHANGE,
// with iperf3's names; what iperf3 sends that GoNet does not act on
// (window, MSS, TOS, congestion...) is ignored.
type Params struct {
	TCP          Flag   `json:"tcp,omitempty"`
	UDP          Flag   `json:"udp,omitempty"`
	Omit         int    `json:"omit"`
	Time         int    `json:"time"`
	Num          uint64 `json:"num"`
	BlockCount   uint64 `json:"blockcount"`
	Parallel     int    `json:"parallel"`
	Reverse      Flag   `json:"reverse,omitempty"`
	Bidir        Flag   `json:"bidirectional,omitempty"`
	Len          int    `json:"len"`
	Bandwidth    uint64 `json:"bandwidth,omitempty"`
	PacingTimer  int    `json:"pacing_timer,omitempty"`
	Counters64   Flag   `json:"udp_counters_64bit,omitempty"`
	ServerOutput Flag   `json:"get_server_output,omitempty"`
	Version      string `json:"client_version,omitempty"`
}

// Flag is a parameter that counts by its presence: iperf3 sends some as
// true ("reverse"), others as 1 ("udp_counters_64bit"), and reads
// neither's value, so any value present sets it. An unset flag is left
// out when sent: "reverse": false would mean reverse to iperf3.
type Flag bool

// UnmarshalJSON sets the flag whatever its value.
func (f *Flag) UnmarshalJSON([]byte) error {
	*f = true
	return nil
}

// Results are what each side sends the other after EXCHANGE_RESULTS:
// the client first, then the server.
type Results struct {
	CPUTotal  float64 `json:"cpu_util_total"`
	CPUUser   float64 `json:"cpu_util_user"`
	CPUSystem float64 `json:"cpu_util_system"`
	// SenderHasRetransmits is 1 when the sender counted retransmissions,
	// 0 when it could not, -1 when this side was the receiver.
	SenderHasRetransmits Int             `json:"sender_has_retransmits"`
	Streams              []StreamResults `json:"streams"`
}

// StreamResults are one stream's counts as its side saw them: the bytes
// it sent or received and, for UDP, the receiver's packet count, losses
// and jitter.
type StreamResults struct {
	ID          int     `json:"id"`
	Bytes       uint64  `json:"bytes"`
	Retransmits Int     `json:"retransmits"`
	Jitter      float64 `json:"jitter"` // seconds
	Errors      Int     `json:"errors"` // datagrams lost
	Packets     Int     `json:"packets"`
	StartTime   float64 `json:"start_time"`
	EndTime     float64 `json:"end_time"` // seconds since start_time
}

// Int is a signed number in iperf3's JSON, which cJSON may print as
// its unsigned 64-bit pattern (-1 as 18446744073709551615) or as a
// float; it decodes all three.
type Int int64

// UnmarshalJSON decodes a number in any of the forms cJSON prints.
func (n *Int) UnmarshalJSON(b []byte) error {
	s := string(b)
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		*n = Int(i)
		return nil
	}
	if u, err := strconv.ParseUint(s, 10, 64); err == nil {
		*n = Int(int64(u)) // the pattern of a negative number
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("iperf3: %q is not a number", s)
	}
	*n = Int(f)
	return nil
}

// streamID is the id iperf3 gives the i-th stream of a test (from 0):
// 1 for the first, then 3, 4, 5..., a numbering iperf3 keeps for
// compatibility between its versions. Each side numbers its streams
// this way, in the order they were made, and results name streams by it.
func streamID(i int) int {
	if i == 0 {
		return 1
	}
	return i + 2
}
