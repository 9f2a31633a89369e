package suite

import (
	"os"
	"strconv"
	"strings"

	"github.com/gonetstack/gonet/internal/netns"
)

// kernelCounters reads the kernel's TCP/IP counters of a namespace (as
// nstat does): the Ip, Icmp, Tcp, Udp and TcpExt MIBs, and the drops of its
// devices other than loopback (for a TAP device, tx_dropped counts frames
// the kernel dropped because the stack behind it did not read them in
// time). /proc/thread-self/net, not /proc/net: the namespace is the
// thread's, inside Do, not the process's.
func kernelCounters(ns *netns.NS) map[string]int64 {
	m := map[string]int64{}
	ns.Do(func() error {
		for _, f := range []string{"snmp", "netstat"} {
			b, err := os.ReadFile("/proc/thread-self/net/" + f)
			if err != nil {
				continue
			}
			parseMIB(string(b), m)
		}
		if b, err := os.ReadFile("/proc/thread-self/net/dev"); err == nil {
			for _, l := range strings.Split(string(b), "\n")[2:] {
				name, rest, ok := strings.Cut(l, ":")
				if !ok || strings.TrimSpace(name) == "lo" {
					continue
				}
				f := strings.Fields(rest)
				if len(f) < 12 {
					continue
				}
				rxDrop, _ := strconv.ParseInt(f[3], 10, 64)
				txDrop, _ := strconv.ParseInt(f[11], 10, 64)
				m["Dev.RxDropped"] += rxDrop
				m["Dev.TxDropped"] += txDrop
			}
		}
		return nil
	})
	return m
}

var keepMIB = map[string]bool{"Ip": true, "Icmp": true, "Tcp": true, "Udp": true, "TcpExt": true}

// parseMIB reads the "Name: fields" / "Name: values" line pairs of
// /proc/net/snmp and /proc/net/netstat into m as "Name.field".
func parseMIB(s string, m map[string]int64) {
	lines := strings.Split(s, "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		hn, hv, ok1 := strings.Cut(lines[i], ":")
		vn, vv, ok2 := strings.Cut(lines[i+1], ":")
		if !ok1 || !ok2 || hn != vn || !keepMIB[hn] {
			continue
		}
		names, vals := strings.Fields(hv), strings.Fields(vv)
		for j := range min(len(names), len(vals)) {
			if v, err := strconv.ParseInt(vals[j], 10, 64); err == nil {
				m[hn+"."+names[j]] = v
			}
		}
	}
}

// counterDelta returns after minus before, keeping what changed, each name
// prefixed.
func counterDelta(prefix string, before, after map[string]int64, into map[string]float64) {
	for k, a := range after {
		if d := a - before[k]; d != 0 {
			into[prefix+k] = float64(d)
		}
	}
}
