// Package gateway gives an isolated guest (a container's network namespace,
// a VM) its network without privileges on the host, as slirp4netns and
// pasta do: GoNet terminates the guest's flows and relays each through
// ordinary host sockets (issue 11).
//
// flows.go takes the stack's forwarding hooks and decides each of the
// guest's flows by what the host gets for it: a SYN is answered once the
// host's connect has succeeded, been refused or found no route; the flow
// is then relayed. udp.go relays UDP flows until they idle out, as
// conntrack's entries do. inbound.go runs the inbound port forwards: a
// host listener whose connections, or UDP flows, are carried into the
// guest from the gateway's address. table.go lists the flows relayed now,
// with both of their sides (Gateway.Flows).
//
// relay.go carries a terminated TCP flow between the guest's GoNet
// connection and the host's kernel socket, a goroutine per direction, with
// FINs and resets carried across and no buffer held while the flow idles.
// ping.go sends a guest's echo requests from the host, through a ping
// socket where net.ipv4.ping_group_range allows one, else a raw socket,
// and maps what came back (a reply, an ICMP error, a send that failed) to
// what the guest is to be told. config.go lays out the guest's network as
// slirp4netns does (gateway .2, DNS .3, guest .100) and parses inbound
// port forwards. tap.go makes the guest's TAP device inside the guest's
// network namespace, served from the gateway's own, and configures the
// guest's side of it (internal/rtnl), as slirp4netns --netns --configure.
package gateway
