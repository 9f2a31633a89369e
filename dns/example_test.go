package dns_test

import (
	"context"
	"log"
	"net/netip"

	"github.com/gonetstack/gonet/dns"
	"github.com/gonetstack/gonet/stack"
)

// A gateway serves DNS on its second address, 10.0.2.3, over GoNet's own
// sockets, and relays to the host's resolvers from /etc/resolv.conf.
func Example() {
	s := stack.New(stack.Config{})
	defer s.Close()
	// ... s.AddNIC("tap0", ep); s.AddAddress("tap0", 10.0.2.2/24) ...
	if err := s.AddAddress("tap0", netip.MustParsePrefix("10.0.2.3/24")); err != nil {
		log.Fatal(err)
	}
	f, err := dns.New(dns.Config{ResolvConf: "/etc/resolv.conf"})
	if err != nil {
		log.Fatal(err)
	}
	laddr := netip.MustParseAddrPort("10.0.2.3:53")
	pc, err := s.ListenUDP(laddr)
	if err != nil {
		log.Fatal(err)
	}
	l, err := s.ListenTCP(laddr)
	if err != nil {
		log.Fatal(err)
	}
	// Serve returns when the context ends, or either socket fails.
	if err := f.Serve(context.Background(), pc, l); err != nil {
		log.Fatal(err)
	}
}
