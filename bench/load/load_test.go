package load

import "testing"

func TestSummarise(t *testing.T) {
	var us []float64
	for i := 1; i <= 100; i++ {
		us = append(us, float64(101-i))
	}
	l := summarise(us)
	if l.Samples != 100 || l.MeanUS != 50.5 || l.P50US != 50 || l.P99US != 99 || l.MaxUS != 100 {
		t.Fatalf("%+v", l)
	}
	if l := summarise(nil); l.Samples != 0 {
		t.Fatalf("%+v", l)
	}
}

// Each generator dials the family of the server's address, so that an
// IPv6 workload never falls back to IPv4 and the reverse.
func TestGeneratorsDialTheFamilyOfTheAddress(t *testing.T) {
	for _, c := range []struct{ addr, tcp, udp string }{
		{"10.77.0.2", "tcp4", "udp4"},
		{"fd77::2", "tcp6", "udp6"},
		{"fe80::1%gn0", "tcp6", "udp6"},
		{"::ffff:10.77.0.2", "tcp4", "udp4"}, // an IPv4 node (RFC 4291 section 2.5.5.2)
	} {
		if got := tcpNet(c.addr); got != c.tcp {
			t.Errorf("tcpNet(%q) = %q, want %q", c.addr, got, c.tcp)
		}
		if got := udpNet(c.addr); got != c.udp {
			t.Errorf("udpNet(%q) = %q, want %q", c.addr, got, c.udp)
		}
	}
}
