package ethernet

import (
	"encoding/binary"
	"testing"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/wire"
)

// FuzzCutRun feeds the NIC's UDP run cutter any frame and metadata: it
// must never panic, and a run it takes must come out as datagrams whose
// IP and UDP lengths are their own, whose payloads add up to the run's,
// each at most the run's segment size; every packet it took from the pool
// is accounted for.
func FuzzCutRun(f *testing.F) {
	seed := make([]byte, 20+8+2500)
	seed[0], seed[9] = 0x45, wire.ProtoUDP
	binary.BigEndian.PutUint16(seed[2:4], uint16(len(seed)))
	binary.BigEndian.PutUint16(seed[10:12], wire.Checksum(seed[:20], 0))
	binary.BigEndian.PutUint16(seed[20+4:], uint16(len(seed)-20))
	f.Add(seed, uint16(1000), uint8(buffer.NeedsCsum), uint16(14+20), uint16(6))
	f.Add(seed, uint16(1), uint8(buffer.DataValid), uint16(0), uint16(0))
	six := make([]byte, 40+8+300)
	six[0], six[6] = 0x60, wire.ProtoUDP
	binary.BigEndian.PutUint16(six[4:6], uint16(len(six)-40))
	binary.BigEndian.PutUint16(six[40+4:], uint16(len(six)-40))
	f.Add(six, uint16(100), uint8(buffer.NeedsCsum), uint16(14+40), uint16(6))
	f.Fuzz(func(t *testing.T, b []byte, size uint16, flags uint8, start, offset uint16) {
		if len(b) > 9000 {
			return // small segments make many datagrams of a short run
		}
		pool := buffer.NewPool()
		n := &NIC{pool: pool}
		p := pool.Get(len(b))
		copy(p.Bytes(), b)
		p.Offload = buffer.Offload{GSOType: buffer.GSOUDPL4, GSOSize: size, Flags: flags, CsumStart: start, CsumOffset: offset}
		ds := n.cutRun(p, nil)
		if len(ds) == 0 {
			if n.Stats.RxUSODropped.Load() != 1 {
				t.Fatal("a run yielded nothing and was not counted as dropped")
			}
		}
		total := 0
		for i, d := range ds {
			db := d.Bytes()
			var l4 int
			if db[0]>>4 == 6 {
				h, err := wire.ParseIPv6(db)
				if err != wire.IPv6OK || len(h) != len(db) {
					t.Fatalf("datagram %d: IPv6 header %v, length %d of %d", i, err, len(h), len(db))
				}
				l4 = wire.IPv6HeaderLen
			} else {
				h, err := wire.ParseIPv4(db)
				if err != wire.IPv4OK || len(h) != len(db) {
					t.Fatalf("datagram %d: IPv4 header %v, length %d of %d", i, err, len(h), len(db))
				}
				l4 = h.HeaderLen()
			}
			u, ok := wire.ParseUDP(db[l4:])
			if !ok || u.Length() != len(db)-l4 {
				t.Fatalf("datagram %d: UDP length %d in %d bytes", i, u.Length(), len(db)-l4)
			}
			if len(u.Payload()) == 0 || len(u.Payload()) > int(size) {
				t.Fatalf("datagram %d: %d payload bytes, segments of %d", i, len(u.Payload()), size)
			}
			total += len(u.Payload())
			d.Release()
		}
		if len(ds) > 0 {
			r, _ := parseRun(b, p.Offload)
			if want := r.end - r.l4 - wire.UDPHeaderLen; total != want {
				t.Fatalf("datagrams carry %d payload bytes, the run %d", total, want)
			}
		}
		p.Release()
		if pool.Outstanding() != 0 {
			t.Fatalf("%d packets not returned to the pool", pool.Outstanding())
		}
	})
}
