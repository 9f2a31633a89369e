package iperf3

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// FuzzControlMessages feeds the decoders of what a peer sends on the
// control connection and in UDP datagrams arbitrary bytes: they return
// errors or counts, never panic, and never allocate more than maxJSON
// for a frame.
func FuzzControlMessages(f *testing.F) {
	frame := func(text string) []byte {
		return append(binary.BigEndian.AppendUint32(nil, uint32(len(text))), text...)
	}
	f.Add(frame(`{"tcp":true,"omit":0,"time":2,"parallel":4,"len":131072}`))
	f.Add(frame(`{"cpu_util_total":0,"sender_has_retransmits":18446744073709551615,"streams":[{"id":1,"bytes":5,"retransmits":-1,"jitter":0.1,"errors":0,"packets":3}]}`))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Add([]byte{0, 0, 0, 12, 0x65, 0x53, 0xf1, 0, 0, 1, 0xe2, 0x40, 0, 0, 0, 7})
	f.Fuzz(func(t *testing.T, b []byte) {
		var p Params
		readJSON(bytes.NewReader(b), "parameters", &p)
		var r Results
		readJSON(bytes.NewReader(b), "results", &r)
		readState(bytes.NewReader(b))
		isHelloReply(b)
		for _, wide := range []bool{false, true} {
			s := &stream{udp: true, wide: wide, counting: true}
			s.datagram(b, time.Now())
			s.datagram(b, time.Now())
			if got := s.results(time.Second).Bytes; got != uint64(2*len(b)) {
				t.Fatalf("counted %d bytes of two %d-byte datagrams", got, len(b))
			}
		}
	})
}
