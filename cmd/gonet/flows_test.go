package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gonetstack/gonet/gateway"
	"github.com/gonetstack/gonet/services"
)

// fakeFlows is a flowLister with fixed flows.
type fakeFlows []gateway.FlowInfo

func (f fakeFlows) Flows() []gateway.FlowInfo { return f }

// now is the instant the flows' ages are taken at.
var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// outbound and inbound are two flows: the guest's connection to the host's
// loopback through the gateway's address, and one an inbound forward made.
var (
	outbound = gateway.FlowInfo{Proto: gateway.TCP, Guest: ap("10.0.2.100:40312"), Peer: ap("10.0.2.2:8080"),
		HostLocal: ap("127.0.0.1:51000"), HostRemote: ap("127.0.0.1:8080"), ToHost: 517, ToGuest: 1048576,
		Since: now.Add(-65 * time.Second), LastActive: now.Add(-2500 * time.Millisecond)}
	inboundUDP = gateway.FlowInfo{Proto: gateway.UDP, Inbound: true, Guest: ap("10.0.2.100:53"), Peer: ap("10.0.2.2:49152"),
		HostLocal: ap("0.0.0.0:5353"), HostRemote: ap("192.0.2.7:33000"), ToHost: 1, ToGuest: 1,
		Since: now.Add(-time.Second), LastActive: now.Add(-time.Second)}
)

func TestFlowTableShowsBothSidesOfEachFlow(t *testing.T) {
	tests := []struct {
		name  string
		flows []gateway.FlowInfo
		want  string
	}{
		{"none", nil,
			"Relayed flows: 0\n" +
				"Proto  Guest Address:Port  Peer Address:Port  Host Local Address:Port  Host Peer Address:Port  To-Host  To-Guest  Age  Idle\n"},
		{"an outbound TCP flow and an inbound UDP one", []gateway.FlowInfo{outbound, inboundUDP},
			"Relayed flows: 2\n" +
				"Proto  Guest Address:Port  Peer Address:Port  Host Local Address:Port  Host Peer Address:Port  To-Host  To-Guest  Age   Idle\n" +
				"tcp    10.0.2.100:40312    10.0.2.2:8080      127.0.0.1:51000          127.0.0.1:8080          517      1048576   1m5s  2s\n" +
				"udp<   10.0.2.100:53       10.0.2.2:49152     0.0.0.0:5353             192.0.2.7:33000         1        1         1s    1s\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := writeFlowTable(&b, tt.flows, now); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("printed\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}

// gonet ss against a gateway's control socket prints GoNet's connection
// table and then the relayed flows; against gonet up's, which has no
// flows to answer with, the table alone.
func TestSSShowsAGatewaysRelayedFlows(t *testing.T) {
	dir := useControlDir(t)
	rows := []services.ConnRow{{State: "ESTABLISHED", Local: ap("10.0.2.2:8080"), Remote: ap("10.0.2.100:40312")}}
	tests := []struct {
		name      string
		gateway   bool
		wantFlows bool
	}{
		{"a gateway", true, true},
		{"gonet up", false, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, "f"+string(rune('0'+i))+".sock")
			h := services.HTTPHandler("", fakeStatus{rows: rows})
			if tt.gateway {
				h = flowsHandler(fakeFlows{outbound}, h)
			}
			startControlHandler(t, path, h)
			code, stdout, stderr := runArgs(t, "ss", "-control", path)
			if code != exitOK || stderr != "" {
				t.Fatalf("gonet ss: exit code %d, stderr %q", code, stderr)
			}
			table, flows, found := strings.Cut(stdout, "\nRelayed flows: ")
			if !strings.Contains(table, "ESTAB") || !strings.Contains(table, "10.0.2.100:40312") {
				t.Errorf("no connection table in\n%s", stdout)
			}
			if found != tt.wantFlows {
				t.Fatalf("relayed flows shown: %v, want %v:\n%s", found, tt.wantFlows, stdout)
			}
			if !found {
				return
			}
			lines := strings.Split(strings.TrimSpace(flows), "\n")
			if len(lines) != 3 || lines[0] != "1" {
				t.Fatalf("relayed flows section:\n%s\nwant a count of 1, a header and one flow", flows)
			}
			if f := strings.Fields(lines[2]); len(f) != 9 || f[0] != "tcp" || f[1] != "10.0.2.100:40312" || f[2] != "10.0.2.2:8080" ||
				f[3] != "127.0.0.1:51000" || f[4] != "127.0.0.1:8080" || f[5] != "517" || f[6] != "1048576" {
				t.Errorf("flow line %q, want the flow's two sides and its bytes", lines[2])
			}
		})
	}
}
