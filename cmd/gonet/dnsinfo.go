package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"strings"
)

// The resolver's configuration, for gonet dns: the servers and search
// domains names are resolved with, and where each came from (-dns and
// -search by hand, a DHCP lease, routers' advertisements, DHCPv6), as
// resolvectl status shows a host's.

// dnsInfo is the resolver's configuration and its sources.
type dnsInfo struct {
	Servers []netip.AddrPort `json:"servers"`
	Search  []string         `json:"search"`
	Sources []dnsSourceInfo  `json:"sources"`
}

// dnsSourceInfo is one source: "by hand", "dhcp", "router
// advertisements" or "dhcpv6", on a NIC but by hand.
type dnsSourceInfo struct {
	From    string           `json:"from"`
	NIC     string           `json:"nic,omitempty"`
	Servers []netip.AddrPort `json:"servers"`
	Search  []string         `json:"search"`
	// Used is false for a learned source while servers or domains are
	// set by hand.
	Used bool `json:"used"`
}

func (h *host) dnsInfo() dnsInfo {
	cfg := h.stack.DNS()
	d := dnsInfo{Servers: cfg.Servers, Search: cfg.Search, Sources: []dnsSourceInfo{}}
	for _, src := range h.stack.DNSSources() {
		si := dnsSourceInfo{From: "by hand", Servers: src.Servers, Search: src.Search, Used: src.Used}
		if !src.ByHand {
			si.From, si.NIC = src.From.Protocol.String(), src.From.NIC
		}
		d.Sources = append(d.Sources, si)
	}
	return d
}

var dnsCommand = &command{
	name:    "dns",
	summary: "show the DNS servers and search domains of a running gonet up, and where they came from",
	usage:   "gonet dns [-tap NAME | -control PATH]",
	about: `Asks a running gonet up which DNS servers and search domains its resolver
uses, through its control socket, and prints them as resolv.conf has
them ("nameserver ADDR", "search DOMAIN..."), after a comment line per
source: -dns and -search by hand, which alone are used while given; else
a DHCP lease's, those routers advertise (RFC 8106's RDNSS and DNSSL
options) and DHCPv6's, merged in that order. Exits 0 on success, 1 when
no daemon answers.`,
	flags: func() *flag.FlagSet { fs, _ := linkFlags("dns"); return fs },
	run: func(ctx context.Context, cmd *command, out *output, args []string) int {
		return runLink(ctx, cmd, out, args, writeDNS)
	},
}

// writeDNS prints li's resolver configuration as resolv.conf has it, its
// sources as comments.
func writeDNS(w io.Writer, li linkInfo) {
	for _, src := range li.DNS.Sources {
		from := src.From
		if src.NIC != "" {
			from += " on " + src.NIC
		}
		if !src.Used {
			from += " (not used: set by hand)"
		}
		fmt.Fprintf(w, "# %s: %s\n", from, resolvLines(src.Servers, src.Search, "; "))
	}
	if len(li.DNS.Servers) == 0 {
		fmt.Fprintln(w, "# no DNS servers: names resolve from the static table alone")
	}
	if s := resolvLines(li.DNS.Servers, li.DNS.Search, "\n"); s != "" {
		fmt.Fprintln(w, s)
	}
}

// resolvLines writes servers and domains as resolv.conf's lines, joined
// by sep. A server on a port other than 53, which resolv.conf cannot
// say, is written with its port.
func resolvLines(servers []netip.AddrPort, search []string, sep string) string {
	var lines []string
	for _, a := range servers {
		if a.Port() == 53 {
			lines = append(lines, "nameserver "+a.Addr().String())
		} else {
			lines = append(lines, "nameserver "+a.String())
		}
	}
	if len(search) > 0 {
		lines = append(lines, "search "+strings.Join(search, " "))
	}
	return strings.Join(lines, sep)
}
