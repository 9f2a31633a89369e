package iperf3

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strings"
	"testing"
	"time"
)

func TestStateMessagesAreOneSignedByte(t *testing.T) {
	for _, tc := range []struct {
		state State
		wire  byte
		name  string
	}{
		{TestStart, 1, "TEST_START"},
		{TestRunning, 2, "TEST_RUNNING"},
		{TestEnd, 4, "TEST_END"},
		{ParamExchange, 9, "PARAM_EXCHANGE"},
		{CreateStreams, 10, "CREATE_STREAMS"},
		{ServerTerminate, 11, "SERVER_TERMINATE"},
		{ClientTerminate, 12, "CLIENT_TERMINATE"},
		{ExchangeResults, 13, "EXCHANGE_RESULTS"},
		{DisplayResults, 14, "DISPLAY_RESULTS"},
		{IperfDone, 16, "IPERF_DONE"},
		{AccessDenied, 0xff, "ACCESS_DENIED"},
		{ServerError, 0xfe, "SERVER_ERROR"},
		{State(42), 42, "state(42)"},
	} {
		var buf bytes.Buffer
		if err := writeState(&buf, tc.state); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), []byte{tc.wire}) {
			t.Errorf("%v on the wire: % x, want %02x", tc.state, buf.Bytes(), tc.wire)
		}
		got, err := readState(&buf)
		if err != nil || got != tc.state {
			t.Errorf("read back %v, %v; want %v", got, err, tc.state)
		}
		if got.String() != tc.name {
			t.Errorf("String() = %q, want %q", got.String(), tc.name)
		}
	}
}

func TestJSONIsFramedByABigEndianLength(t *testing.T) {
	var buf bytes.Buffer
	if err := writeJSON(&buf, "parameters", Params{TCP: true, Time: 2, Parallel: 4, Len: 1000}); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	n := binary.BigEndian.Uint32(b[:4])
	if int(n) != len(b)-4 {
		t.Fatalf("length %d, but %d bytes of JSON follow", n, len(b)-4)
	}
	var m map[string]any
	if err := json.Unmarshal(b[4:], &m); err != nil {
		t.Fatal(err)
	}
	// iperf3 tests flags for presence: "reverse":false would mean reverse.
	for key, want := range map[string]any{"tcp": true, "time": 2.0, "parallel": 4.0, "len": 1000.0} {
		if m[key] != want {
			t.Errorf("%q = %v, want %v", key, m[key], want)
		}
	}
	for _, absent := range []string{"udp", "reverse", "bidirectional", "udp_counters_64bit"} {
		if _, ok := m[absent]; ok {
			t.Errorf("%q present in %s", absent, b[4:])
		}
	}
	var p Params
	if err := readJSON(bytes.NewReader(b), "parameters", &p); err != nil {
		t.Fatal(err)
	}
	if !p.TCP || p.UDP || p.Parallel != 4 {
		t.Errorf("read back %+v", p)
	}
}

func TestReadJSONRefusesBadFrames(t *testing.T) {
	frame := func(n uint32, text string) []byte {
		return append(binary.BigEndian.AppendUint32(nil, n), text...)
	}
	for _, tc := range []struct {
		name  string
		input []byte
		want  error
	}{
		{"too long", frame(maxJSON+1, ""), errJSONTooLong},
		{"short length", []byte{0, 0}, io.ErrUnexpectedEOF},
		{"short text", frame(10, `{"a":1}`), io.ErrUnexpectedEOF},
		{"empty", nil, io.EOF},
	} {
		var v map[string]any
		if err := readJSON(bytes.NewReader(tc.input), "results", &v); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	var v map[string]any
	if err := readJSON(bytes.NewReader(frame(3, "{{{")), "results", &v); err == nil || !strings.Contains(err.Error(), "decoding") {
		t.Errorf("bad JSON: %v, want a decoding error", err)
	}
}

func TestIntDecodesWhatCJSONPrints(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Int
	}{
		{"-1", -1},
		{"18446744073709551615", -1}, // -1 as cJSON prints an unsigned cast
		{"0", 0},
		{"3000000000", 3000000000},
		{"1.5e3", 1500},
	} {
		var n Int
		if err := json.Unmarshal([]byte(tc.text), &n); err != nil || n != tc.want {
			t.Errorf("%s: %d, %v; want %d", tc.text, n, err, tc.want)
		}
	}
	var n Int
	if err := json.Unmarshal([]byte(`"x"`), &n); err == nil {
		t.Error(`"x" decoded as a number`)
	}
}

func TestCookieIs36CharactersAndANul(t *testing.T) {
	a, b := NewCookie(), NewCookie()
	if a == b {
		t.Error("two cookies alike")
	}
	if a[CookieSize-1] != 0 {
		t.Error("no NUL at the end")
	}
	for _, c := range a.String() {
		if !strings.ContainsRune(cookieAlphabet, c) {
			t.Errorf("%q outside iperf3's alphabet", c)
		}
	}
}

func TestStreamIDsFollowIperf3(t *testing.T) {
	for i, want := range []int{1, 3, 4, 5, 6} {
		if got := streamID(i); got != want {
			t.Errorf("stream %d: id %d, want %d", i, got, want)
		}
	}
}

func TestHelloReplyIsRecognisedInBothForms(t *testing.T) {
	for _, tc := range []struct {
		b    []byte
		want bool
	}{
		{[]byte("6789"), true},
		{binary.LittleEndian.AppendUint32(nil, 987654321), true},
		{[]byte("9876"), false},
		{[]byte("67890"), false},
		{nil, false},
	} {
		if got := isHelloReply(tc.b); got != tc.want {
			t.Errorf("% x: %v, want %v", tc.b, got, tc.want)
		}
	}
}

func TestDatagramHeader(t *testing.T) {
	sent := time.Unix(1700000000, 123456000)
	for _, tc := range []struct {
		wide  bool
		count uint64
		want  []byte
	}{
		{false, 7, []byte{0x65, 0x53, 0xf1, 0x00, 0x00, 0x01, 0xe2, 0x40, 0, 0, 0, 7}},
		{true, 1 << 40, []byte{0x65, 0x53, 0xf1, 0x00, 0x00, 0x01, 0xe2, 0x40, 0, 0, 1, 0, 0, 0, 0, 0}},
	} {
		d := datagram(make([]byte, headerLen(tc.wide)))
		d.encode(sent, tc.count, tc.wide)
		if !bytes.Equal(d, tc.want) {
			t.Errorf("wide=%v: % x, want % x", tc.wide, []byte(d), tc.want)
		}
		if d.count(tc.wide) != tc.count || d.sentMicros() != sent.UnixMicro() {
			t.Errorf("wide=%v: read back count %d, time %d", tc.wide, d.count(tc.wide), d.sentMicros())
		}
		if !d.valid(tc.wide) || d[:len(d)-1].valid(tc.wide) {
			t.Errorf("wide=%v: valid wrong at the header's length", tc.wide)
		}
	}
}

func TestReceiverCountsLossAndReordering(t *testing.T) {
	for _, tc := range []struct {
		name             string
		counts           []uint64
		highest          uint64
		lost, outOfOrder int64
	}{
		{"in order", []uint64{1, 2, 3, 4}, 4, 0, 0},
		{"a gap", []uint64{1, 2, 5, 6}, 6, 2, 0},
		{"late fills a gap", []uint64{1, 3, 2, 4}, 4, 0, 1},
		{"first lost", []uint64{2, 3}, 3, 1, 0},
		{"duplicate", []uint64{1, 2, 2, 3}, 3, 0, 1},
		{"tail lost, unseen", []uint64{1, 2}, 2, 0, 0},
	} {
		var r udpReceiver
		for _, c := range tc.counts {
			r.add(100, c, 0, 0)
		}
		if r.highest != tc.highest || r.lost != tc.lost || r.outOfOrder != tc.outOfOrder || r.bytes != uint64(100*len(tc.counts)) {
			t.Errorf("%s: highest %d lost %d out of order %d bytes %d; want %d %d %d %d", tc.name,
				r.highest, r.lost, r.outOfOrder, r.bytes, tc.highest, tc.lost, tc.outOfOrder, 100*len(tc.counts))
		}
	}
}

func TestReceiverJitterFollowsRFC3550(t *testing.T) {
	for _, tc := range []struct {
		name     string
		transits []int64 // microseconds, arrival - sent
		want     float64 // microseconds
	}{
		{"constant delay", []int64{500, 500, 500}, 0},
		{"one step", []int64{100, 260}, 10},           // |160|/16
		{"two steps", []int64{100, 260, 100}, 19.375}, // 10 + (160-10)/16
		// The clocks' offset cancels: only differences count.
		{"offset clocks", []int64{1e12 + 100, 1e12 + 260}, 10},
	} {
		var r udpReceiver
		for i, tr := range tc.transits {
			sent := int64(i) * 1000
			r.add(100, uint64(i+1), sent, sent+tr)
		}
		if math.Abs(r.jitter-tc.want) > 1e-9 {
			t.Errorf("%s: jitter %g µs, want %g", tc.name, r.jitter, tc.want)
		}
	}
}

func TestPacerKeepsToItsRate(t *testing.T) {
	ctx := t.Context()
	p := pacer{rate: 8e6, start: time.Now()} // a megabyte a second
	for range 100 {
		if !p.sent(ctx, 1000) {
			t.Fatal("pacer stopped")
		}
	}
	// 100 kB at 1 MB/s is 100 ms, less the slack it may run ahead.
	if el := time.Since(p.start); el < 100*time.Millisecond-pacingSlack {
		t.Errorf("100 kB at 1 MB/s took %v, want about 100ms", el)
	}
	unlimited := pacer{start: time.Now()}
	for range 1000 {
		unlimited.sent(ctx, 1<<20)
	}
	if el := time.Since(unlimited.start); el > 50*time.Millisecond {
		t.Errorf("an unlimited pacer slept %v", el)
	}
}

func TestFlagsCountByPresence(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Params
	}{
		{`{"udp":true,"reverse":true}`, Params{UDP: true, Reverse: true}},
		{`{"tcp":true,"udp_counters_64bit":1,"get_server_output":1}`, Params{TCP: true, Counters64: true, ServerOutput: true}},
		// iperf3 reads no flag's value: present is set.
		{`{"tcp":true,"reverse":0}`, Params{TCP: true, Reverse: true}},
		{`{"tcp":true}`, Params{TCP: true}},
	} {
		var p Params
		if err := json.Unmarshal([]byte(tc.text), &p); err != nil || p != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.text, p, err, tc.want)
		}
	}
}
