package ipv6_test

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"

	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ipv6"
	"github.com/gonetstack/gonet/wire"
)

func iid(t *testing.T, s string) ipv6.IID {
	t.Helper()
	a := netip.MustParseAddr("::" + s).As16()
	return ipv6.IID(a[8:])
}

func TestEUI64InsertsFFFEAndInvertsUniversalBit(t *testing.T) {
	for _, tc := range []struct {
		name string
		mac  wire.MAC
		want string
	}{
		{"universal address gets the bit set", wire.MAC{0x00, 0x1b, 0x21, 0x3c, 0x9d, 0xf8}, "21b:21ff:fe3c:9df8"},
		{"local address gets the bit cleared", wire.MAC{0x02, 0x00, 0x00, 0x00, 0x00, 0x01}, "0:ff:fe00:1"},
		{"group bit kept", wire.MAC{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}, "300:5eff:fe00:1"},
		{"all ones", wire.MAC{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, "fdff:ffff:feff:ffff"},
		{"another universal address", wire.MAC{0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde}, "3656:78ff:fe9a:bcde"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got, want := ipv6.EUI64(tc.mac), iid(t, tc.want); got != want {
				t.Errorf("EUI64(%v) = %v, want %v", tc.mac, got, want)
			}
		})
	}
}

// RFC 4291 appendix A in bits: cccccc0gcccccccc cccccccc mmmmmmmm... becomes
// cccccc1gcccccccc cccccccc11111111 11111110mmmmmmmm mmmmmmmmmmmmmmmm.
func TestEUI64KeepsEveryOtherBitOfTheMAC(t *testing.T) {
	for bit := range 48 {
		var mac wire.MAC
		mac[bit/8] = 0x80 >> (bit % 8)
		got := ipv6.EUI64(mac)
		want := ipv6.IID{0x02, 0, 0, 0xff, 0xfe, 0, 0, 0}
		pos := bit
		if bit >= 24 {
			pos += 16
		}
		want[pos/8] ^= 0x80 >> (pos % 8)
		if got != want {
			t.Errorf("EUI64 with only MAC bit %d set = %v, want %v", bit, got, want)
		}
	}
}

func TestReservedIIDsAreThoseOfRFC5453AndTheIANARegistry(t *testing.T) {
	for _, tc := range []struct {
		iid      string
		reserved bool
	}{
		{"0:0:0:0", true},              // subnet-router anycast, RFC 4291 2.6.1
		{"0:0:0:1", false},             // ::1 style, not reserved
		{"fdff:ffff:ffff:ff7f", false}, // just below RFC 2526's range
		{"fdff:ffff:ffff:ff80", true},  // first reserved subnet anycast
		{"fdff:ffff:ffff:fffe", true},  // Mobile IPv6 home agents anycast
		{"fdff:ffff:ffff:ffff", true},  // last reserved subnet anycast
		{"fdff:ffff:feff:ffff", false}, // EUI-64 of ff:ff:ff:ff:ff:ff
		{"200:5eff:fdff:ffff", false},  // just below IANA's Ethernet block
		{"200:5eff:fe00:0", true},      // IANA Ethernet block start
		{"200:5eff:fe00:5213", true},   // Proxy Mobile IPv6, RFC 6543
		{"200:5eff:feff:ffff", true},   // IANA Ethernet block end
		{"200:5eff:ff00:0", false},     // just above it
		{"21b:21ff:fe3c:9df8", false},  // an ordinary EUI-64
		{"ffff:ffff:ffff:ffff", false}, // all ones: RFC 2526 reserves only under fdff
		{"fe00:0:0:0", false},          // unrelated high value
		{"fdff:ffff:ffff:ff00", false}, // below the anycast range
		{"0200:5eff:fe00:5212", true},  // last before Proxy Mobile IPv6
		{"0300:5eff:fe00:0000", false}, // group bit set: not the block
		{"0000:5eff:fe00:0000", false}, // universal bit unset: not the block
		{"0200:5eff:fe01:2345", true},  // inside the block
		{"0200:5efe:fe00:0000", false}, // not ff:fe in the middle
		{"0200:5eff:fe00:0001", true},  // inside the block
		{"fdff:ffff:ffff:ff81", true},  // inside RFC 2526's range
		{"fdff:ffff:ffff:fffd", true},  // inside RFC 2526's range
		{"fdfe:ffff:ffff:ffff", false}, // below by the top bits
		{"0000:0000:0000:0080", false}, // low bits only
		{"0000:0000:0001:0000", false}, // not all zeros
		{"8000:0000:0000:0000", false}, // high bit only
		{"ffff:ffff:ffff:ff80", false}, // only the fdff prefix is reserved
		{"fcff:ffff:ffff:ffff", false}, // below fdff
		{"0200:5eff:fe00:5214", true},  // first after Proxy Mobile IPv6
		{"0200:5eff:feff:fffe", true},  // inside the block
		{"0200:5eff:fe80:0000", true},  // inside the block
	} {
		if got := iid(t, tc.iid).IsReserved(); got != tc.reserved {
			t.Errorf("IID %s IsReserved = %v, want %v", tc.iid, got, tc.reserved)
		}
	}
}

var testKey = []byte("0123456789abcdef")

func stableInputs() *ipv6.StableIIDInputs {
	return &ipv6.StableIIDInputs{
		Prefix:    netip.MustParsePrefix("2001:db8:1:2::/64"),
		NetIface:  []byte("eth0"),
		NetworkID: nil,
		SecretKey: testKey,
	}
}

func mustStable(t *testing.T, in *ipv6.StableIIDInputs, dad uint8) ipv6.IID {
	t.Helper()
	got, counter, err := ipv6.StableIID(in, dad)
	if err != nil {
		t.Fatalf("StableIID(%+v, %d): %v", in, dad, err)
	}
	if counter != dad {
		t.Fatalf("StableIID(%+v, %d) moved the DAD counter to %d: a reserved identifier from SHA-256, odds 2^-40", in, dad, counter)
	}
	if got.IsReserved() {
		t.Fatalf("StableIID(%+v, %d) = reserved %v", in, dad, got)
	}
	return got
}

func TestStableIIDIsTheSameForTheSameInputs(t *testing.T) {
	a := mustStable(t, stableInputs(), 0)
	b := mustStable(t, stableInputs(), 0)
	if a != b {
		t.Errorf("StableIID twice on the same inputs = %v then %v", a, b)
	}
	// The address in the prefix need not be masked: F takes the prefix.
	in := stableInputs()
	in.Prefix = netip.MustParsePrefix("2001:db8:1:2::99/64")
	if c := mustStable(t, in, 0); c != a {
		t.Errorf("StableIID on an unmasked prefix = %v, on the masked one %v", c, a)
	}
}

func TestStableIIDChangesWithEachInput(t *testing.T) {
	base := mustStable(t, stableInputs(), 0)
	for _, tc := range []struct {
		name   string
		change func(*ipv6.StableIIDInputs)
		dad    uint8
	}{
		{"another prefix", func(in *ipv6.StableIIDInputs) { in.Prefix = netip.MustParsePrefix("2001:db8:1:3::/64") }, 0},
		{"the link-local prefix", func(in *ipv6.StableIIDInputs) { in.Prefix = ipv6.LinkLocalPrefix() }, 0},
		{"another DAD counter", func(*ipv6.StableIIDInputs) {}, 1},
		{"another interface", func(in *ipv6.StableIIDInputs) { in.NetIface = []byte("eth1") }, 0},
		{"a network id", func(in *ipv6.StableIIDInputs) { in.NetworkID = []byte("ssid") }, 0},
		{"bytes moved from Net_Iface to Network_ID", func(in *ipv6.StableIIDInputs) { in.NetIface, in.NetworkID = []byte("eth"), []byte("0") }, 0},
		{"another key", func(in *ipv6.StableIIDInputs) { in.SecretKey = []byte("0123456789abcdeF") }, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := stableInputs()
			tc.change(in)
			if got := mustStable(t, in, tc.dad); got == base {
				t.Errorf("StableIID with %s = %v, the same as before", tc.name, got)
			}
		})
	}
}

// A node keeps its stable addresses across upgrades only if F's input
// encoding never changes: the prefix's 64 bits, Net_Iface and Network_ID
// each after a 2-byte length, the DAD counter's byte, the key (RFC 7217
// section 5), hashed with SHA-256 and cut to the low 64 bits. The expected
// values were computed apart from this package (Python's hashlib).
func TestStableIIDEncodingIsFixed(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   ipv6.StableIIDInputs
		dad  uint8
		want string
	}{
		{"SLAAC prefix, no network id", ipv6.StableIIDInputs{Prefix: netip.MustParsePrefix("2001:db8:1:2::/64"), NetIface: []byte("eth0"), SecretKey: testKey}, 0, "1df5:f3bc:a545:2981"},
		{"link-local, network id, DAD counter 2", ipv6.StableIIDInputs{Prefix: ipv6.LinkLocalPrefix(), NetIface: []byte("eth0"), NetworkID: []byte("ssid"), SecretKey: testKey}, 2, "9358:3c61:649f:12c1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mustStable(t, &tc.in, tc.dad); got != iid(t, tc.want) {
				t.Errorf("StableIID = %v, want %s: the encoding of F's inputs changed, and with it every stable address", got, tc.want)
			}
		})
	}
}

func TestNewSecretKeyIsLongEnoughAndFollowsTheStackRand(t *testing.T) {
	a := ipv6.NewSecretKey(env.NewRand(rand.NewPCG(1, 2)))
	b := ipv6.NewSecretKey(env.NewRand(rand.NewPCG(1, 2)))
	c := ipv6.NewSecretKey(env.NewRand(rand.NewPCG(1, 3)))
	if len(a) != ipv6.MinSecretKeyLen || !bytes.Equal(a, b) || bytes.Equal(a, c) {
		t.Errorf("NewSecretKey: %x and %x from one seed, %x from another; want %d bytes, equal for one seed only", a, b, c, ipv6.MinSecretKeyLen)
	}
	in := stableInputs()
	in.SecretKey = a
	mustStable(t, in, 0)
}

func TestStableIIDRejectsBadInputs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*ipv6.StableIIDInputs)
		errHas string
	}{
		{"short key", func(in *ipv6.StableIIDInputs) { in.SecretKey = testKey[:15] }, "secret key of 15 bytes"},
		{"/48 prefix", func(in *ipv6.StableIIDInputs) { in.Prefix = netip.MustParsePrefix("2001:db8::/48") }, "2001:db8::/48: length 48"},
		{"IPv4 prefix", func(in *ipv6.StableIIDInputs) { in.Prefix = netip.MustParsePrefix("10.0.0.0/8") }, "not IPv6"},
		{"no prefix", func(in *ipv6.StableIIDInputs) { in.Prefix = netip.Prefix{} }, "invalid prefix"},
		{"huge Net_Iface", func(in *ipv6.StableIIDInputs) { in.NetIface = make([]byte, 1<<16) }, "Net_Iface of 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := stableInputs()
			tc.change(in)
			_, _, err := ipv6.StableIID(in, 0)
			if err == nil || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), "stable interface identifier") {
				t.Errorf("StableIID with a %s: error %v, want one containing %q", tc.name, err, tc.errHas)
			}
		})
	}
}

// Over many inputs the identifiers spread over the whole 64 bits (no bit
// stuck), none is reserved, and none repeats.
func TestStableIIDsSpreadAndAreNeverReserved(t *testing.T) {
	seen := map[ipv6.IID]bool{}
	var or, and uint64 = 0, ^uint64(0)
	in := stableInputs()
	for i := range 2000 {
		in.NetIface = binary.BigEndian.AppendUint32(nil, uint32(i))
		got := mustStable(t, in, 0)
		if seen[got] {
			t.Fatalf("StableIID repeated %v", got)
		}
		seen[got] = true
		v := binary.BigEndian.Uint64(got[:])
		or, and = or|v, and&v
	}
	if or != ^uint64(0) || and != 0 {
		t.Errorf("over 2000 identifiers bits ever set %016x, always set %016x: want every bit to vary", or, and)
	}
}

func TestLinkLocalIsFE80Slash64AndTheIID(t *testing.T) {
	for _, tc := range []struct {
		mac  wire.MAC
		want string
	}{
		{wire.MAC{0x00, 0x1b, 0x21, 0x3c, 0x9d, 0xf8}, "fe80::21b:21ff:fe3c:9df8"},
		{wire.MAC{0x02, 0, 0, 0, 0, 0}, "fe80::ff:fe00:0"},
	} {
		got := ipv6.LinkLocal(ipv6.EUI64(tc.mac))
		if got != netip.MustParseAddr(tc.want) {
			t.Errorf("LinkLocal(EUI64(%v)) = %v, want %s", tc.mac, got, tc.want)
		}
		// Go's own predicate, independently of this package.
		if !got.IsLinkLocalUnicast() || !ipv6.LinkLocalPrefix().Contains(got) {
			t.Errorf("LinkLocal(EUI64(%v)) = %v, not link-local unicast in fe80::/64", tc.mac, got)
		}
	}
	stable := mustStable(t, &ipv6.StableIIDInputs{Prefix: ipv6.LinkLocalPrefix(), NetIface: []byte("eth0"), SecretKey: testKey}, 0)
	if a := ipv6.LinkLocal(stable); !a.IsLinkLocalUnicast() || !bytes.Equal(a.AsSlice()[8:], stable[:]) {
		t.Errorf("LinkLocal(%v) = %v", stable, a)
	}
}

func TestFromPrefixTakesOnlySlash64(t *testing.T) {
	id := iid(t, "21b:21ff:fe3c:9df8")
	for _, tc := range []struct {
		prefix string
		want   string // empty: an error containing errHas
		errHas string
	}{
		{"2001:db8:1:2::/64", "2001:db8:1:2:21b:21ff:fe3c:9df8", ""},
		{"2001:db8:1:2:aaaa::/64", "2001:db8:1:2:21b:21ff:fe3c:9df8", ""}, // host bits of the prefix ignored
		{"fd00:1::/64", "fd00:1::21b:21ff:fe3c:9df8", ""},
		{"2001:db8::/48", "", "prefix 2001:db8::/48: length 48 plus a 64-bit interface identifier is not 128 bits (RFC 4862 section 5.5.3 d)"},
		{"2001:db8:1:2::/80", "", "length 80"},
		{"2001:db8::1/128", "", "length 128"},
		{"192.0.2.0/24", "", "prefix 192.0.2.0/24 is not IPv6"},
	} {
		t.Run(tc.prefix, func(t *testing.T) {
			got, err := ipv6.FromPrefix(netip.MustParsePrefix(tc.prefix), id)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), tc.errHas) || !strings.HasPrefix(err.Error(), "ipv6: address from prefix: ") {
					t.Errorf("FromPrefix(%s) = %v, %v; want an error containing %q", tc.prefix, got, err, tc.errHas)
				}
				return
			}
			if err != nil || got != netip.MustParseAddr(tc.want) {
				t.Errorf("FromPrefix(%s) = %v, %v; want %s", tc.prefix, got, err, tc.want)
			}
		})
	}
}

func TestIIDStringIsFourGroups(t *testing.T) {
	if got := (ipv6.IID{0x02, 0x1b, 0x21, 0xff, 0xfe, 0x3c, 0x9d, 0xf8}).String(); got != "021b:21ff:fe3c:9df8" {
		t.Errorf("IID.String() = %q", got)
	}
}
