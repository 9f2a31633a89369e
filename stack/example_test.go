package stack_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"

	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

// A host on a TAP device that serves and fetches over HTTP with the
// standard library, unchanged, and pings. (README.md shows the same.)
func Example() {
	ep, err := tap.Open("tap0", tap.Options{MTU: 1500}) // created when absent
	if err != nil {
		panic(err)
	}
	s := stack.New(stack.Config{})
	defer s.Close()
	s.AddNIC("tap0", ep)
	s.AddAddress("tap0", netip.MustParsePrefix("10.0.0.2/24"))
	s.SetDefaultGateway(netip.MustParseAddr("10.0.0.1"), "tap0")

	// Serve HTTP over GoNet's TCP with the standard library's server.
	l, _ := s.Listen("tcp", ":80")
	go http.Serve(l, http.FileServer(http.Dir(".")))

	// Fetch over GoNet's TCP with the standard library's client.
	client := &http.Client{Transport: &http.Transport{DialContext: s.DialContext}}
	resp, err := client.Get("http://10.0.0.1:8080/")
	if err == nil {
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.Status, len(body), "bytes")
	}

	// ICMP from the stack's own ping client.
	rtt, err := s.Ping(context.Background(), netip.MustParseAddr("10.0.0.1"), 56)
	fmt.Println(rtt, err)
}

// An embedding program reads the stack's counters as values, each with its
// kind, without parsing text: here two stacks joined in memory, one pinging
// the other.
func ExampleStack_Metrics() {
	epA, epB := pipe.New(1500, net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2})
	a, b := stack.New(stack.Config{}), stack.New(stack.Config{})
	defer a.Close()
	defer b.Close()
	a.AddNIC("eth0", epA)
	b.AddNIC("eth0", epB)
	a.AddAddress("eth0", netip.MustParsePrefix("10.0.0.1/24"))
	b.AddAddress("eth0", netip.MustParsePrefix("10.0.0.2/24"))
	if _, err := a.Ping(context.Background(), netip.MustParseAddr("10.0.0.2"), 56); err != nil {
		panic(err)
	}

	m := b.Metrics()
	fmt.Println(m["ICMP.OutEchoReps"].Kind, m["ICMP.OutEchoReps"].Value)
	fmt.Println(m["TCP.CurrEstab"].Kind, m["TCP.CurrEstab"].Value)
	fmt.Println(m["Memory.Limit"].Kind, m["Memory.Limit"].Unit)
	// Output:
	// counter 1
	// gauge 0
	// gauge bytes
}
