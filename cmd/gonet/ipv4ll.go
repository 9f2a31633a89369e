package main

import (
	"errors"
	"flag"
	"io/fs"
	"net/netip"

	"github.com/gonetstack/gonet/ipv4ll"
)

// ipv4llConfig is what -addr ipv4ll takes beside the keyword.
type ipv4llConfig struct {
	// ipv4llFile is -ipv4ll-file: the file that keeps the link-local
	// address across restarts (RFC 3927 section 2.1); empty: none.
	ipv4llFile string
}

// registerIPv4LL adds -addr ipv4ll's flags to fs.
func (c *ipv4llConfig) registerIPv4LL(fs *flag.FlagSet) {
	fs.StringVar(&c.ipv4llFile, "ipv4ll-file", "", "with -addr ipv4ll, keep the link-local address in `FILE` and probe for it first at the next start (RFC 3927 section 2.1)")
}

// checkIPv4LL checks -ipv4ll-file against -addr.
func (c *ipv4llConfig) checkIPv4LL(ipv4llOn bool) error {
	if c.ipv4llFile != "" && !ipv4llOn {
		return usagef("-ipv4ll-file keeps a link-local address, and there is none without -addr ipv4ll")
	}
	return nil
}

// startIPv4LL starts -addr ipv4ll's client on the host's NIC. With
// -ipv4ll-file it probes first for the address the file holds, and keeps
// there each address it claims, as -dhcp-lease keeps the lease.
func (h *host) startIPv4LL(c *ipv4llConfig) (*ipv4ll.Client, error) {
	var cfg ipv4ll.Config
	if file := c.ipv4llFile; file != "" {
		log := h.stack.Logger()
		switch a, err := ipv4ll.LoadAddress(file); {
		case err == nil:
			cfg.Remembered = a
		case !errors.Is(err, fs.ErrNotExist):
			log.Warn("IPv4 link-local address file unreadable: choosing one afresh", "file", file, "err", err)
		}
		cfg.OnClaim = func(a netip.Addr) {
			if err := ipv4ll.SaveAddress(file, a); err != nil {
				log.Warn("IPv4 link-local address not kept", "file", file, "err", err)
			}
		}
	}
	return ipv4ll.StartWith(h.stack, h.nic, cfg)
}
