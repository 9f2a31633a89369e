// Command mdns is an example of multicast on GoNet: a stack on a TAP
// device that answers multicast DNS (RFC 6762) queries for its name,
// <name>.local, as a host's mDNS responder does, with package mdns (which
// gonet up runs by default).
//
//	sudo go run ./examples/mdns -tap gonet0 -addr 10.0.0.2/24 -name gonet
//
// The responder joins 224.0.0.251 and ff02::fb on the TAP (so the stack
// sends IGMP and MLD reports and its NIC takes the groups' frames),
// listens on port 5353 shared with any other responder of the stack, and
// answers A and AAAA queries with the NIC's addresses.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/signal"
	"syscall"

	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/mdns"
	"github.com/gonetstack/gonet/stack"
)

func main() {
	tapName := flag.String("tap", "gonet0", "TAP device to create")
	addr := flag.String("addr", "10.0.0.2/24", "GoNet's IPv4 address and prefix")
	name := flag.String("name", "gonet", "host name, answered as <name>.local")
	flag.Parse()
	prefix, err := netip.ParsePrefix(*addr)
	if err != nil {
		log.Fatalf("mdns: -addr: %v", err)
	}
	ep, err := tap.Open(*tapName, tap.Options{})
	if err != nil {
		log.Fatalf("mdns: %v", err)
	}
	s := stack.New(stack.Config{})
	defer s.Close()
	if err := s.AddNIC(*tapName, ep); err != nil {
		log.Fatalf("mdns: %v", err)
	}
	if err := s.AddAddress(*tapName, prefix); err != nil {
		log.Fatalf("mdns: %v", err)
	}
	r, err := mdns.Start(s, *tapName, *name)
	if err != nil {
		log.Fatalf("mdns: %v", err)
	}
	defer r.Close()
	claimed, err := r.WaitClaimed(context.Background())
	if err != nil {
		log.Fatalf("mdns: %v", err)
	}
	fmt.Printf("mdns: answering %s on %s\n", claimed, *tapName)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
}
