package gateway

import (
	"net/netip"
	"strings"
	"testing"
)

func TestNewNetworkLaysOutTheSubnetAsSlirp4netns(t *testing.T) {
	tests := []struct {
		subnet, gateway, dns, guest string
		err                         string
	}{
		{subnet: "10.0.2.0/24", gateway: "10.0.2.2", dns: "10.0.2.3", guest: "10.0.2.100"},
		{subnet: "10.0.2.77/24", gateway: "10.0.2.2", dns: "10.0.2.3", guest: "10.0.2.100"}, // host bits dropped
		{subnet: "192.168.128.0/17", gateway: "192.168.128.2", dns: "192.168.128.3", guest: "192.168.128.100"},
		{subnet: "172.16.0.0/25", gateway: "172.16.0.2", dns: "172.16.0.3", guest: "172.16.0.100"},
		{subnet: "172.16.0.0/26", err: "too small"},
		{subnet: "fd00::/64", err: "not IPv4"},
	}
	for _, tt := range tests {
		t.Run(tt.subnet, func(t *testing.T) {
			n, err := NewNetwork(netip.MustParsePrefix(tt.subnet))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("NewNetwork = %+v, %v; want an error saying %q", n, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := []string{n.Gateway.String(), n.DNS.String(), n.Guest.String()}
			want := []string{tt.gateway, tt.dns, tt.guest}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Fatalf("gateway, DNS, guest = %v, want %v", got, want)
			}
		})
	}
}

func TestParseForward(t *testing.T) {
	tests := []struct {
		spec string
		want string // Forward.String(), or the error's telling part
		ok   bool
	}{
		{"tcp:8080:80", "tcp:0.0.0.0:8080:80", true},
		{"udp:127.0.0.1:5353:53", "udp:127.0.0.1:5353:53", true},
		{"tcp:65535:1", "tcp:0.0.0.0:65535:1", true},
		{"sctp:8080:80", "protocol", false},
		{"tcp:8080", "number of fields", false},
		{"tcp:[::1]:8080:80", "tcp:[::1]:8080:80", true},
		{"udp:[::]:5353:53", "udp:[::]:5353:53", true},
		{"tcp:8080:10.0.2.101:80", "tcp:0.0.0.0:8080:10.0.2.101:80", true},
		{"tcp:8080:[fd00::100]:80", "tcp:0.0.0.0:8080:[fd00::100]:80", true},
		{"tcp:[::1]:8080:[fd00::100]:80", "tcp:[::1]:8080:[fd00::100]:80", true},
		{"tcp:127.0.0.1:8080:[fd00::100]:80", "tcp:127.0.0.1:8080:[fd00::100]:80", true},
		{"tcp:[fe80::1%eth0]:8080:80", "tcp:[fe80::1%eth0]:8080:80", true},
		{"tcp:a:b:c:d:e", "number of fields", false},
		{"tcp:::1:8080:80", "number of fields", false},
		{"tcp:a:b:c:d", "host address", false},
		{"tcp:0:80", "host port", false},
		{"tcp:8080:65536", "guest port", false},
		{"tcp:localhost:8080:80", "host address", false},
		{"tcp:8080:guest:80", "guest address", false},
		{"tcp:[::1:8080:80", "without its ']'", false},
		{"tcp:[::1]8080:80", "not followed by ':'", false},
		{"tcp:[127.0.0.1]:8080:80", "only IPv6 takes them", false},
		{"tcp:[::ffff:127.0.0.1]:8080:80", "IPv4-mapped", false},
		{"tcp:8080:[fe80::1%tap0]:80", "zone", false},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			f, err := ParseForward(tt.spec)
			switch {
			case tt.ok && err != nil:
				t.Fatalf("ParseForward: %v", err)
			case tt.ok && f.String() != tt.want:
				t.Fatalf("ParseForward = %v, want %v", f, tt.want)
			case !tt.ok && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("ParseForward = %v, %v; want an error about %q", f, err, tt.want)
			}
		})
	}
}
