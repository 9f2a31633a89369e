package services

import (
	"context"
	"fmt"
	"net"
	"strings"

	"github.com/gonetstack/gonet/iperf3"
)

// Service is one service the daemon can run, with its well-known port.
type Service struct {
	// Name is how the command line names the service ("echo").
	Name string
	// Port is the service's well-known port, for UDP and TCP alike.
	Port uint16
	// ServeUDP runs the service on a bound UDP endpoint; nil when the
	// service has no UDP form (http).
	ServeUDP func(ctx context.Context, conn net.PacketConn) error
	// ServeTCP runs the service on a listener. Every service has a TCP
	// form; http's serves the status pages of no stack, and the daemon
	// runs its own with HTTPHandler and ServeHTTP instead.
	ServeTCP func(ctx context.Context, ln net.Listener) error
	// ServeBoth runs a service that needs its TCP listener and its UDP
	// endpoint together, on the same port (iperf3: tests are run over
	// TCP, and UDP tests' streams come to the UDP port). Such a service
	// has neither ServeUDP nor ServeTCP.
	ServeBoth func(ctx context.Context, ln net.Listener, conn net.PacketConn) error
}

// known lists the services in port order, which is the order Lookup and
// Known return them in.
var known = []Service{
	{Name: "echo", Port: 7, ServeUDP: ServeEchoUDP, ServeTCP: ServeEchoTCP},           // RFC 862
	{Name: "discard", Port: 9, ServeUDP: ServeDiscardUDP, ServeTCP: ServeDiscardTCP},  // RFC 863
	{Name: "daytime", Port: 13, ServeUDP: ServeDaytimeUDP, ServeTCP: ServeDaytimeTCP}, // RFC 867
	{Name: "chargen", Port: 19, ServeUDP: ServeChargenUDP, ServeTCP: ServeChargenTCP}, // RFC 864
	{Name: "http", Port: 80, ServeTCP: serveHTTPDefault},                              // RFC 9110; TCP only
	{Name: "iperf3", Port: iperf3.Port, ServeBoth: ServeIperf3},                       // ESnet's iperf3; no RFC
}

// Known returns every service Lookup knows, in port order.
func Known() []Service {
	return append([]Service(nil), known...)
}

// KnownNames returns the names of the services Lookup knows, in port order.
func KnownNames() []string {
	names := make([]string, len(known))
	for i, s := range known {
		names[i] = s.Name
	}
	return names
}

// Lookup parses a comma-separated list of service names, as the command
// line gives it ("echo,discard,chargen,daytime,http"), and returns the
// services in port order. Names are case-insensitive and may be surrounded
// by spaces; a name given twice is taken once; an empty list gives no
// services. Names it does not know are an error that names them all.
func Lookup(names string) ([]Service, error) {
	want := map[string]bool{}
	var unknown []string
	for name := range strings.SplitSeq(names, ",") {
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		if !isKnown(name) {
			unknown = append(unknown, fmt.Sprintf("%q", name))
			continue
		}
		want[name] = true
	}
	if len(unknown) > 0 {
		noun := "service"
		if len(unknown) > 1 {
			noun = "services"
		}
		return nil, fmt.Errorf("services: unknown %s %s in %q (known: %s)",
			noun, strings.Join(unknown, ", "), names, strings.Join(KnownNames(), ", "))
	}
	var out []Service
	for _, s := range known {
		if want[s.Name] {
			out = append(out, s)
		}
	}
	return out, nil
}

func isKnown(name string) bool {
	for _, s := range known {
		if s.Name == name {
			return true
		}
	}
	return false
}

// ServeIperf3 runs an iperf3 server (package iperf3) on ln and conn, for
// the stock iperf3 client and gonet iperf3, one test at a time, until
// ctx is done.
func ServeIperf3(ctx context.Context, ln net.Listener, conn net.PacketConn) error {
	srv := &iperf3.Server{}
	return srv.Serve(ctx, ln, conn)
}
