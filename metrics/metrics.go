package metrics

import (
	"cmp"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/gonetstack/gonet/stats"
)

// ContentType is the media type of the text exposition format Write
// writes (version 0.0.4, which every Prometheus scrapes).
const ContentType = "text/plain; version=0.0.4; charset=utf-8"

// sources says, for each layer, where its values are kept and after what
// they are named: the HELP text of its metrics, beside the name gonet stats
// gives. One line a layer rather than one a counter, so that a new counter
// is described without a line written for it; the doc comment of its field
// in the struct named here says more.
var sources = map[string]string{
	"NIC":        "ethernet.Stats, a NIC's counters, after the kernel's /sys/class/net statistics",
	"ARP":        "arp.Stats, a NIC's ARP (RFC 826)",
	"IPv4":       "ipv4.Stats, after the kernel's Ip MIB (RFC 4293)",
	"ICMP":       "icmp.Stats, after the kernel's Icmp MIB (RFC 4293)",
	"IPv6":       "ipv6.Stats, after the kernel's Ip6 MIB (/proc/net/snmp6, RFC 4293)",
	"ICMPv6":     "icmpv6.Stats, after the kernel's Icmp6 MIB (/proc/net/snmp6, RFC 4293)",
	"NDP":        "ndp.Stats, a NIC's neighbour discovery, addresses and MLD (RFC 4861, RFC 4862, RFC 3810)",
	"IGMP":       "igmp.Stats, a NIC's IGMP host side (RFC 3376, RFC 2236)",
	"UDP":        "udp.Stats, after the kernel's Udp MIB (RFC 4113)",
	"TCP":        "tcp.Stats, after the kernel's Tcp MIB (RFC 4022) and TcpExt",
	"Memory":     "the stack's memory budget (budget.Budget)",
	"Buffers":    "the stack's packet buffers lent and not returned (buffer.Pool)",
	"Gateway":    "gateway.Stats, the gateway's relayed flows and refusals",
	"DNS":        "dns.Stats, the gateway's DNS forwarder",
	"DHCP":       "dhcp.Stats, the gateway's DHCP server",
	"DHCPClient": "dhcp.ClientStats, a NIC's DHCP client (RFC 2131)",
	"Iperf3":     "iperf3.ServerStats, the iperf3 server of gonet up -serve iperf3",
	"TAP":        "the kernel's own counters of the TAP device (IFLA_STATS64), as ip -s link shows them",
	"Link":       "the link endpoint's own counters (tap.Stats: frames read and written, writes refused by cause)",
	"Bridge":     "bridge.Stats, gonet bridge's filtering database and ports lost",
	"Port":       "bridge.PortStats, a port of gonet bridge (the nic label names it)",
}

// Help returns the HELP text of the value GoNet calls dotted: that name as
// gonet stats prints it (a NIC's name as "*"), and where the value is
// kept.
func Help(dotted string) string {
	parts := strings.Split(dotted, ".")
	if nicScoped[parts[0]] && len(parts) >= 3 {
		parts = []string{parts[0], "*", parts[len(parts)-1]}
	}
	help := strings.Join(parts, ".") + " in gonet stats"
	if src, ok := sources[parts[0]]; ok {
		help += "; " + src
	}
	return help
}

// Families returns snap as Prometheus metric families, sorted by name,
// each family's metrics by NIC. Two values that would take the same name
// and labels, or one name with two kinds, are an error: the exposition
// format has no way to show them.
func Families(snap stats.Snapshot) ([]*dto.MetricFamily, error) {
	byName := map[string]*dto.MetricFamily{}
	seen := map[[2]string]string{}
	for _, dotted := range slices.Sorted(maps.Keys(snap)) {
		x := snap[dotted]
		name, nic := Name(dotted, x)
		if other, dup := seen[[2]string{name, nic}]; dup {
			return nil, fmt.Errorf("metrics: %s and %s both become %s{nic=%q}", other, dotted, name, nic)
		}
		seen[[2]string{name, nic}] = dotted
		typ := dto.MetricType_COUNTER
		if x.Kind == stats.KindGauge {
			typ = dto.MetricType_GAUGE
		}
		f := byName[name]
		if f == nil {
			f = &dto.MetricFamily{Name: &name, Help: ptr(Help(dotted)), Type: &typ}
			byName[name] = f
		} else if f.GetType() != typ {
			return nil, fmt.Errorf("metrics: %s is a %v, but %s is a %v", dotted, x.Kind, name, f.GetType())
		}
		m := &dto.Metric{}
		if nic != "" {
			m.Label = []*dto.LabelPair{{Name: ptr(NICLabel), Value: ptr(nic)}}
		}
		v := float64(x.Value)
		if typ == dto.MetricType_COUNTER {
			m.Counter = &dto.Counter{Value: &v}
		} else {
			m.Gauge = &dto.Gauge{Value: &v}
		}
		f.Metric = append(f.Metric, m)
	}
	fams := make([]*dto.MetricFamily, 0, len(byName))
	for _, f := range byName {
		slices.SortFunc(f.Metric, func(a, b *dto.Metric) int { return cmp.Compare(nicOf(a), nicOf(b)) })
		fams = append(fams, f)
	}
	slices.SortFunc(fams, func(a, b *dto.MetricFamily) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return fams, nil
}

func nicOf(m *dto.Metric) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == NICLabel {
			return l.GetValue()
		}
	}
	return ""
}

func ptr[T any](v T) *T { return &v }

// Write writes snap to w in the text exposition format, a HELP and a TYPE
// line before each family.
func Write(w io.Writer, snap stats.Snapshot) error {
	fams, err := Families(snap)
	if err != nil {
		return err
	}
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(w, f); err != nil {
			return fmt.Errorf("metrics: writing %s: %w", f.GetName(), err)
		}
	}
	return nil
}

// Handler serves the snapshot src gives at each request in the text
// exposition format, to GET and HEAD, and after it the Go runtime's
// figures (Runtime).
func Handler(src func() stats.Snapshot) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
			return
		}
		var b strings.Builder
		if err := Write(&b, src()); err != nil {
			http.Error(w, "500 "+err.Error(), http.StatusInternalServerError)
			return
		}
		for _, f := range Runtime() {
			if _, err := expfmt.MetricFamilyToText(&b, f); err != nil {
				http.Error(w, "500 "+err.Error(), http.StatusInternalServerError)
				return
			}
		}
		w.Header().Set("Content-Type", ContentType)
		w.Header().Set("Cache-Control", "no-store")
		io.WriteString(w, b.String())
	})
}
