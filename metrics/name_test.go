package metrics_test

import (
	"testing"

	"github.com/gonetstack/gonet/metrics"
	"github.com/gonetstack/gonet/stats"
)

var (
	counter = stats.Sample{Kind: stats.KindCounter}
	gauge   = stats.Sample{Kind: stats.KindGauge}
)

func TestNameFollowsPrometheusConventions(t *testing.T) {
	tests := []struct {
		behaviour string
		dotted    string
		x         stats.Sample
		name, nic string
	}{
		{"a counter ends in _total", "TCP.RetransSegs", counter, "gonet_tcp_retrans_segs_total", ""},
		{"a gauge does not", "TCP.CurrEstab", gauge, "gonet_tcp_curr_estab", ""},
		{"the layer is lower-cased whole", "IPv4.InReceives", counter, "gonet_ipv4_in_receives_total", ""},
		{"an acronym is one word", "IPv4.PMTUReductions", counter, "gonet_ipv4_pmtu_reductions_total", ""},
		{"an acronym's plural stays with it", "TCP.ChallengeACKsLimited", counter, "gonet_tcp_challenge_acks_limited_total", ""},
		{"a plural acronym at the end", "IPv4.ReasmOKs", counter, "gonet_ipv4_reasm_oks_total", ""},
		{"an acronym at the end", "NIC.tap0.RxGSO", counter, "gonet_nic_rx_gso_total", "tap0"},
		{"a family after an acronym", "NIC.tap0.RxGSO6", counter, "gonet_nic_rx_gso6_total", "tap0"},
		{"a NIC becomes a label", "NIC.tap0.RxFrames", counter, "gonet_nic_rx_frames_total", "tap0"},
		{"a NIC whose name has a dot", "NIC.eth0.100.TxFrames", counter, "gonet_nic_tx_frames_total", "eth0.100"},
		{"ARP is per NIC too", "ARP.vm0.PendingResolutns", gauge, "gonet_arp_pending_resolutns", "vm0"},
		{"NDP is per NIC too", "NDP.tap0.DADFailed", counter, "gonet_ndp_dad_failed_total", "tap0"},
		{"a versioned acronym is one word", "ICMPv6.InMLDv2Reports", counter, "gonet_icmpv6_in_mldv2_reports_total", ""},
		{"a versioned layer", "ICMPv6.InEchos", counter, "gonet_icmpv6_in_echos_total", ""},
		{"the TAP's kernel counters are per NIC", "TAP.tap0.RxDropped", counter, "gonet_tap_rx_dropped_total", "tap0"},
		{"bytes in the name are the unit, last before _total", "NIC.tap0.RxBytes", counter, "gonet_nic_rx_bytes_total", "tap0"},
		{"a unit word inside the name moves to the end", "Gateway.Relay.BytesToHost", counter, "gonet_gateway_relay_to_host_bytes_total", ""},
		{"a gauge of bytes", "IPv4.ReasmBytes", gauge, "gonet_ipv4_reasm_bytes", ""},
		{"a unit the sample gives is appended", "Memory.Used", stats.Sample{Kind: stats.KindGauge, Unit: "bytes"}, "gonet_memory_used_bytes", ""},
		{"a unit already in the name is not doubled", "X.HeldBytes", stats.Sample{Kind: stats.KindGauge, Unit: "bytes"}, "gonet_x_held_bytes", ""},
		{"seconds are a unit", "X.WaitSeconds", counter, "gonet_x_wait_seconds_total", ""},
		{"nested structs join with underscores", "Gateway.Relay.TCPActive", gauge, "gonet_gateway_relay_tcp_active", ""},
		{"the gateway's own prefix", "Gateway.FlowLimit", counter, "gonet_gateway_flow_limit_total", ""},
		{"the DNS forwarder's", "DNS.ServFails", counter, "gonet_dns_serv_fails_total", ""},
		{"the DHCP server's", "DHCP.OutAcks", counter, "gonet_dhcp_out_acks_total", ""},
		{"an acronym before a word", "DNS.TCPRefused", counter, "gonet_dns_tcp_refused_total", ""},
		{"ECN's run of acronyms", "TCP.ECNCEReceived", counter, "gonet_tcp_ecnce_received_total", ""},
		{"digits stay with their word", "X.Ipv4Drops", counter, "gonet_x_ipv4_drops_total", ""},
		{"a NIC-scoped layer without a NIC", "NIC.RxFrames", counter, "gonet_nic_rx_frames_total", ""},
		{"a bridge's port is its NIC", "Port.tap0.QueueFull", counter, "gonet_port_queue_full_total", "tap0"},
		{"the bridge's own", "Bridge.TableFull", counter, "gonet_bridge_table_full_total", ""},
		{"what a name may not hold becomes _", "My-Layer.Drops", counter, "gonet_my_layer_drops_total", ""},
	}
	for _, tt := range tests {
		t.Run(tt.behaviour, func(t *testing.T) {
			name, nic := metrics.Name(tt.dotted, tt.x)
			if name != tt.name || nic != tt.nic {
				t.Errorf("Name(%q, %v) = %q, %q; want %q, %q", tt.dotted, tt.x.Kind, name, nic, tt.name, tt.nic)
			}
		})
	}
}

func TestHelpNamesTheCounterAndWhereItIsKept(t *testing.T) {
	tests := []struct{ dotted, want string }{
		{"TCP.RetransSegs", "TCP.RetransSegs in gonet stats; tcp.Stats, after the kernel's Tcp MIB (RFC 4022) and TcpExt"},
		{"NIC.tap0.RxFrames", "NIC.*.RxFrames in gonet stats; ethernet.Stats, a NIC's counters, after the kernel's /sys/class/net statistics"},
		{"Future.Thing", "Future.Thing in gonet stats"},
	}
	for _, tt := range tests {
		if got := metrics.Help(tt.dotted); got != tt.want {
			t.Errorf("Help(%q) = %q, want %q", tt.dotted, got, tt.want)
		}
	}
}
