package dns_test

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gonetstack/gonet/dns"
)

func TestReadResolvConfTakesNameserverLinesInOrder(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string // nil: an error
	}{
		{"one", "nameserver 127.0.0.53\n", []string{"127.0.0.53:53"}},
		{"in order, others skipped", "# generated\nsearch example.org\nnameserver 192.0.2.1\noptions edns0\nnameserver 2001:db8::1\n; comment\nnameserver 192.0.2.2 # trailing\n",
			[]string{"192.0.2.1:53", "[2001:db8::1]:53", "192.0.2.2:53"}},
		{"unparsable address skipped", "nameserver not-an-address\nnameserver 192.0.2.9\n", []string{"192.0.2.9:53"}},
		{"commented out", "#nameserver 192.0.2.1\n", nil},
		{"empty", "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "resolv.conf")
			if err := os.WriteFile(path, []byte(tc.text), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := dns.ReadResolvConf(path)
			if tc.want == nil {
				if err == nil {
					t.Fatalf("got %v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var want []netip.AddrPort
			for _, s := range tc.want {
				want = append(want, netip.MustParseAddrPort(s))
			}
			if !slices.Equal(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
		})
	}
}

func TestReadResolvConfMissingFile(t *testing.T) {
	if _, err := dns.ReadResolvConf(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("no error for a missing file")
	}
}

func TestNewTakesUpstreamsFromResolvConf(t *testing.T) {
	path := filepath.Join(t.TempDir(), "resolv.conf")
	if err := os.WriteFile(path, []byte("nameserver 127.0.0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := dns.New(dns.Config{ResolvConf: path})
	if err != nil {
		t.Fatal(err)
	}
	if got := f.Upstreams(); !slices.Equal(got, []netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:53")}) {
		t.Errorf("upstreams %v", got)
	}
	if _, err := dns.New(dns.Config{}); err == nil {
		t.Error("New without upstreams: no error")
	}
}

func TestParseUpstream(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"192.0.2.1", "192.0.2.1:53"},
		{"127.0.0.1:5353", "127.0.0.1:5353"},
		{"::1", "[::1]:53"},
		{"[::1]:5353", "[::1]:5353"},
		{"example.org:53", ""},
		{"192.0.2.1:0", ""},
		{"192.0.2.1:70000", ""},
		{"", ""},
	} {
		got, err := dns.ParseUpstream(tc.in)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("ParseUpstream(%q) = %v, want an error", tc.in, got)
		case tc.want != "" && (err != nil || got != netip.MustParseAddrPort(tc.want)):
			t.Errorf("ParseUpstream(%q) = %v, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}
