package main

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gonetstack/gonet/ipv4ll"
	"github.com/gonetstack/gonet/route"
	"github.com/gonetstack/gonet/services"
)

// What a daemon's NIC holds of both families, for gonet addr, gonet neigh
// and gonet dns: its addresses (IPv4's as given, IPv6's with their
// duplicate address detection state and lifetimes, RFC 4862), its
// neighbours (the ARP cache, and neighbour discovery's, RFC 4861 section
// 7.3), and its resolver's servers and domains (dnsinfo.go). gonet up
// answers at linkPath with a linkInfo as JSON; a daemon that does not (a
// gateway) answers 404.

const linkPath = services.StatusPrefix + "link.json"

// linkInfo is a NIC's addresses and neighbours, and the host's routes.
type linkInfo struct {
	NIC string `json:"nic"`
	MAC string `json:"mac"`
	// State is the link's, "UP" or "DOWN", as ip link shows it
	// (link.StateWatcher; a link that cannot tell is UP).
	State     string      `json:"state"`
	Addresses []addrInfo  `json:"addresses"`
	Neighbors []neighInfo `json:"neighbors"`
	Routes    []routeInfo `json:"routes"`
	Groups    []groupInfo `json:"groups"`
	DNS       dnsInfo     `json:"dns"`
}

// groupInfo is a multicast group the NIC listens to, with its source
// filter (RFC 3376 section 3.2): mode "exclude" with no sources takes any
// source.
type groupInfo struct {
	Group   netip.Addr   `json:"group"`
	Mode    string       `json:"mode"`
	Sources []netip.Addr `json:"sources,omitempty"`
}

// routeInfo is one route of either family's table, in its search order.
type routeInfo struct {
	Dst     netip.Prefix `json:"dst"`
	Gateway netip.Addr   `json:"gateway,omitzero"`
	Dev     string       `json:"dev"`
	// Pref is an IPv6 router's preference (RFC 4191), when not medium.
	Pref string `json:"pref,omitempty"`
}

// forever is the lifetime, in seconds, of what does not expire.
const forever = -1

// addrInfo is one address of a NIC.
type addrInfo struct {
	Prefix netip.Prefix `json:"prefix"`
	// State is "preferred", "tentative", "optimistic", "deprecated" or
	// "duplicate" (ndp.AddrState); an IPv4 address is "preferred" once
	// added.
	State string `json:"state"`
	// ValidLft and PreferredLft are the seconds left, or forever.
	ValidLft     int64 `json:"valid_lft"`
	PreferredLft int64 `json:"preferred_lft"`
	// Temporary marks a temporary address (RFC 8981).
	Temporary bool `json:"temporary,omitempty"`
}

// neighInfo is one neighbour cache entry, of either family.
type neighInfo struct {
	Addr netip.Addr `json:"addr"`
	// MAC is empty while the neighbour is unresolved.
	MAC string `json:"mac,omitempty"`
	// State is RFC 4861's (REACHABLE, STALE, DELAY, PROBE,
	// INCOMPLETE); an ARP entry is REACHABLE until it expires, STALE
	// after.
	State  string `json:"state"`
	Router bool   `json:"router,omitempty"`
}

// linkInfo gathers h's NIC's addresses and neighbours.
func (h *host) linkInfo() linkInfo {
	now := h.stack.Clock().Now()
	li := linkInfo{NIC: h.nic, MAC: h.mac.String(), State: "UP", Addresses: []addrInfo{}, Neighbors: []neighInfo{}, Routes: []routeInfo{}, Groups: []groupInfo{}}
	if up, err := h.stack.LinkUp(h.nic); err == nil && !up {
		li.State = "DOWN"
	}
	if h.dhcp != nil {
		// The lease's address, as ip addr shows one dhclient set: with
		// the time left until it expires.
		if l, ok := h.dhcp.Lease(); ok {
			left := lifetimeLeft(l.Expiry(), now)
			li.Addresses = append(li.Addresses, addrInfo{Prefix: l.Addr, State: "preferred", ValidLft: left, PreferredLft: left})
		}
	}
	if h.ll != nil {
		// The link-local address claimed now (RFC 3927), which may
		// have replaced the one the ready line showed.
		if a, ok := h.ll.Address(); ok {
			li.Addresses = append(li.Addresses, addrInfo{Prefix: netip.PrefixFrom(a, ipv4ll.Prefix.Bits()), State: "preferred", ValidLft: forever, PreferredLft: forever})
		}
	}
	for _, p := range h.addrs {
		if p.Addr().Is4() {
			li.Addresses = append(li.Addresses, addrInfo{Prefix: p, State: "preferred", ValidLft: forever, PreferredLft: forever})
		}
	}
	// A stack without IPv6 says so with an error: it has no IPv6 to show.
	if addrs, err := h.stack.Addresses6(h.nic); err == nil {
		for _, a := range addrs {
			li.Addresses = append(li.Addresses, addrInfo{Prefix: a.Prefix, State: a.State.String(),
				ValidLft: lifetimeLeft(a.ValidUntil, now), PreferredLft: lifetimeLeft(a.PreferredUntil, now), Temporary: a.Temporary})
		}
	}
	if arp, err := h.stack.Neighbors(h.nic); err == nil {
		for _, e := range arp {
			state := "REACHABLE"
			if !now.Before(e.Expires) {
				state = "STALE"
			}
			li.Neighbors = append(li.Neighbors, neighInfo{Addr: e.IP, MAC: e.MAC.String(), State: state})
		}
	}
	if nd, err := h.stack.Neighbors6(h.nic); err == nil {
		for _, n := range nd {
			ni := neighInfo{Addr: n.Addr, State: n.State.String(), Router: n.Router}
			if n.MAC != ([6]byte{}) {
				ni.MAC = n.MAC.String()
			}
			li.Neighbors = append(li.Neighbors, ni)
		}
	}
	for _, r := range h.stack.Routes() {
		li.Routes = append(li.Routes, routeInfo{Dst: r.Dst, Gateway: r.Gateway, Dev: r.Iface.Name()})
	}
	for _, r := range h.stack.Routes6() {
		ri := routeInfo{Dst: r.Dst, Gateway: r.Gateway, Dev: r.Iface.Name()}
		if r.Preference != route.PreferenceMedium {
			ri.Pref = r.Preference.String()
		}
		li.Routes = append(li.Routes, ri)
	}
	if fs, err := h.stack.GroupFilters(h.nic); err == nil {
		for g, f := range fs {
			li.Groups = append(li.Groups, groupInfo{Group: g, Mode: strings.ToLower(f.Mode.String()), Sources: f.Sources})
		}
	}
	li.DNS = h.dnsInfo()
	slices.SortFunc(li.Groups, func(a, b groupInfo) int { return cmpAddr(a.Group, b.Group) })
	slices.SortFunc(li.Addresses, func(a, b addrInfo) int { return cmpAddr(a.Prefix.Addr(), b.Prefix.Addr()) })
	slices.SortFunc(li.Neighbors, func(a, b neighInfo) int { return cmpAddr(a.Addr, b.Addr) })
	return li
}

// cmpAddr orders IPv4 before IPv6, then by address.
func cmpAddr(a, b netip.Addr) int {
	return cmp.Or(cmp.Compare(a.BitLen(), b.BitLen()), a.Compare(b))
}

// lifetimeLeft returns the whole seconds from now until until, or
// forever for a zero until.
func lifetimeLeft(until, now time.Time) int64 {
	if until.IsZero() {
		return forever
	}
	return max(int64(until.Sub(now)/time.Second), 0)
}

// linkHandler answers GET linkPath with h's linkInfo, and passes every
// other request to next.
func linkHandler(h *host, next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", next)
	mux.HandleFunc("GET "+linkPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		json.NewEncoder(w).Encode(h.linkInfo())
	})
	return mux
}

// fetchLink asks the daemon at path for its NIC's addresses and
// neighbours.
func fetchLink(ctx context.Context, path string) (linkInfo, error) {
	var li linkInfo
	body, err := askControl(ctx, path, http.MethodGet, linkPath, nil)
	if se, isStatus := err.(*controlStatusError); isStatus && se.code == http.StatusNotFound {
		return li, fmt.Errorf("%s: this daemon does not show its link (only gonet up does)", path)
	}
	if err != nil {
		return li, err
	}
	if err := json.Unmarshal(body, &li); err != nil {
		return li, fmt.Errorf("%s: reading the link: %w", path, err)
	}
	return li, nil
}

var addrCommand = &command{
	name:    "addr",
	summary: "show the addresses of a running gonet up, IPv4 and IPv6, as ip addr does",
	usage:   "gonet addr [-tap NAME | -control PATH]",
	about: `Asks a running gonet up for its NIC's addresses through its control socket
and prints them as the kernel's ip addr does: the NIC, its link's state
(UP, or DOWN while the TAP's kernel side is down) and its MAC, then
each address, "inet" for IPv4 and "inet6" for IPv6 ("temporary" for
an RFC 8981 one, with -temp-addr), with its state
(tentative while duplicate address detection runs, or optimistic with
-optimistic-dad, preferred, deprecated
once its preferred lifetime ends, duplicate when another node has it) and
its lifetimes in seconds or forever: the link-local address, the -addr
ones and those formed from routers' advertisements (SLAAC). Exits 0 on
success, 1 when no daemon answers.`,
	flags: func() *flag.FlagSet { fs, _ := linkFlags("addr"); return fs },
	run: func(ctx context.Context, cmd *command, out *output, args []string) int {
		return runLink(ctx, cmd, out, args, writeAddrs)
	},
}

var neighCommand = &command{
	name:    "neigh",
	summary: "show the neighbours of a running gonet up, ARP's and IPv6's, as ip neigh does",
	usage:   "gonet neigh [-tap NAME | -control PATH]",
	about: `Asks a running gonet up for its NIC's neighbour caches through its control
socket and prints them as the kernel's ip neigh does, one neighbour a
line: its address, the NIC, its MAC ("lladdr") once resolved, "router"
for an IPv6 router, and its state (RFC 4861's REACHABLE, STALE, DELAY,
PROBE or INCOMPLETE; an ARP entry is REACHABLE until it expires, STALE
after). Exits 0 on success, 1 when no daemon answers.`,
	flags: func() *flag.FlagSet { fs, _ := linkFlags("neigh"); return fs },
	run: func(ctx context.Context, cmd *command, out *output, args []string) int {
		return runLink(ctx, cmd, out, args, writeNeighbors)
	},
}

var routeCommand = &command{
	name:    "route",
	summary: "show the routes of a running gonet up, IPv4's then IPv6's, as ip route does",
	usage:   "gonet route [-tap NAME | -control PATH]",
	about: `Asks a running gonet up for its routing tables through its control socket
and prints them as the kernel's ip route and ip -6 route do, IPv4's then
IPv6's, each in the order it is searched (the longest prefix first): the
destination ("default" for 0.0.0.0/0 and ::/0), "via" the gateway for a
route through a router, the NIC, and "pref" an IPv6 router's preference
when not medium (RFC 4191). The on-link routes of the addresses, the -gw
and DHCP ones, those of routers' advertisements (their default routes and
Route Information, RFC 4191) and the host routes of Redirects, while they
last (RFC 1122 3.2.2.2, RFC 4861 8.3). Exits 0 on success, 1 when no
daemon answers.`,
	flags: func() *flag.FlagSet { fs, _ := linkFlags("route"); return fs },
	run: func(ctx context.Context, cmd *command, out *output, args []string) int {
		return runLink(ctx, cmd, out, args, writeRoutes)
	},
}

var maddrCommand = &command{
	name:    "maddr",
	summary: "show the multicast groups of a running gonet up, with their source filters, as ip maddr does",
	usage:   "gonet maddr [-tap NAME | -control PATH]",
	about: `Asks a running gonet up for the multicast groups its NIC listens to through
its control socket and prints them as the kernel's ip maddr does, the NIC
then one group a line, "inet" for IPv4 and "inet6" for IPv6: those every
interface is in (224.0.0.1, ff02::1, the solicited-node groups of its
addresses), mDNS's and those its programs joined. A group taken from some
sources alone is followed by its source filter, as IGMPv3 and MLDv2
report it (RFC 3376 section 3.2, the sockets' filters merged): "include"
and the sources taken, or "exclude" and the sources left out. Exits 0 on
success, 1 when no daemon answers.`,
	flags: func() *flag.FlagSet { fs, _ := linkFlags("maddr"); return fs },
	run: func(ctx context.Context, cmd *command, out *output, args []string) int {
		return runLink(ctx, cmd, out, args, writeGroups)
	},
}

func linkFlags(name string) (*flag.FlagSet, *controlFlags) {
	c := &controlFlags{}
	fs := newFlagSet(name)
	c.register(fs)
	return fs, c
}

// runLink runs gonet addr or neigh: it fetches the daemon's link and
// writes it with write.
func runLink(ctx context.Context, cmd *command, out *output, args []string, write func(io.Writer, linkInfo)) int {
	fs, c := linkFlags(cmd.name)
	if err := parseControl(cmd.name, fs, c, args); err != nil {
		return reportParseError(out, cmd, err)
	}
	path, err := c.socket()
	if err == nil {
		var li linkInfo
		if li, err = fetchLink(ctx, path); err == nil {
			write(out.stdout, li)
			return exitOK
		}
	}
	fmt.Fprintf(out.stderr, "gonet %s: %v\n", cmd.name, err)
	return exitFail
}

// writeAddrs prints li's addresses as ip addr does.
func writeAddrs(w io.Writer, li linkInfo) {
	fmt.Fprintf(w, "%s: state %s link/ether %s\n", li.NIC, li.State, li.MAC)
	for _, a := range li.Addresses {
		kind := "inet6"
		if a.Prefix.Addr().Is4() {
			kind = "inet"
		}
		scope := "global"
		if a.Prefix.Addr().IsLinkLocalUnicast() {
			scope = "link"
		}
		if a.Temporary {
			scope += " temporary" // as ip addr marks it
		}
		fmt.Fprintf(w, "    %s %s scope %s %s\n        valid_lft %s preferred_lft %s\n",
			kind, a.Prefix, scope, a.State, lifetimeText(a.ValidLft), lifetimeText(a.PreferredLft))
	}
}

// lifetimeText writes a lifetime as ip addr does: "forever" or "86400sec".
func lifetimeText(secs int64) string {
	if secs == forever {
		return "forever"
	}
	return strconv.FormatInt(secs, 10) + "sec"
}

// writeNeighbors prints li's neighbours as ip neigh does.
func writeNeighbors(w io.Writer, li linkInfo) {
	for _, n := range li.Neighbors {
		f := []string{n.Addr.WithZone("").String(), "dev", li.NIC}
		if n.MAC != "" {
			f = append(f, "lladdr", n.MAC)
		}
		if n.Router {
			f = append(f, "router")
		}
		fmt.Fprintln(w, strings.Join(append(f, n.State), " "))
	}
}

// writeRoutes prints li's routes as ip route does.
func writeRoutes(w io.Writer, li linkInfo) {
	for _, r := range li.Routes {
		dst := r.Dst.String()
		if r.Dst.Bits() == 0 {
			dst = "default"
		}
		f := []string{dst}
		if r.Gateway.IsValid() {
			f = append(f, "via", r.Gateway.String())
		}
		f = append(f, "dev", r.Dev)
		if r.Pref != "" {
			f = append(f, "pref", r.Pref)
		}
		fmt.Fprintln(w, strings.Join(f, " "))
	}
}

// writeGroups prints li's multicast groups as ip maddr does, each filter
// of some sources after its group.
func writeGroups(w io.Writer, li linkInfo) {
	fmt.Fprintln(w, li.NIC)
	for _, g := range li.Groups {
		kind := "inet6"
		if g.Group.Is4() {
			kind = "inet "
		}
		f := []string{kind, g.Group.String()}
		if g.Mode != "exclude" || len(g.Sources) > 0 {
			f = append(f, g.Mode)
			for _, s := range g.Sources {
				f = append(f, s.String())
			}
		}
		fmt.Fprintf(w, "\t%s\n", strings.Join(f, " "))
	}
}
