package integration

import (
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// gonet gateway's log as a pipeline reads it (-log-format json): every
// line on stderr one JSON event, none below -log-level, and a flood of
// flows refused by -max-flows one warning, not one per datagram, while the
// ready line and the counters stay on stdout as they were.
func TestGatewayDaemonLogsJSONAtTheLevelAsked(t *testing.T) {
	bin := buildGonet(t)
	w := newGWWorld(t, bin)
	// A UDP server in the internet that reads and never answers: the
	// first flow to it stays relayed (UDPTimeout, 30 s) and holds the one
	// flow -max-flows allows.
	const port = 5000
	var pc net.PacketConn
	if err := w.inet.Do(func() (err error) { pc, err = net.ListenPacket("udp4", inetAddr+":"+strconv.Itoa(port)); return err }); err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	}()

	d := w.start(t, "-configure", "-mtu", "1500", "-max-flows", "1", "-log-format", "json", "-log-level", "warn")
	if !strings.HasPrefix(d.ready, "gonet: gateway up "+gwGuestTAP+" ") {
		t.Errorf("ready line %q, want it as before", d.ready)
	}
	// Each socat sends one datagram from a port of its own: a new flow.
	const sends = 5
	for range sends {
		w.mustGuest(t, 10*time.Second, "socat", "-u", "SYSTEM:printf x", "UDP4-SENDTO:"+inetAddr+":"+strconv.Itoa(port))
	}
	for deadline := time.Now().Add(10 * time.Second); d.counters(t)["Gateway.FlowLimit"] != sends-1; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("Gateway.FlowLimit %d, want %d", d.counters(t)["Gateway.FlowLimit"], sends-1)
		}
	}
	counters := d.stop(t)
	if !strings.Contains(counters, "Gateway.FlowLimit "+strconv.Itoa(sends-1)+"\n") {
		t.Errorf("counters at exit lack Gateway.FlowLimit %d:\n%s", sends-1, counters)
	}

	var warnings []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(d.stderr.String()), "\n") {
		if line == "" {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("stderr line %q is not JSON: %v", line, err)
		}
		if lvl := e["level"]; lvl != "WARN" && lvl != "ERROR" {
			t.Errorf("event %v below -log-level warn", e)
		}
		if strings.HasPrefix(e["msg"].(string), "flow limit reached") {
			warnings = append(warnings, e)
		}
	}
	if len(warnings) != 1 {
		t.Fatalf("%d flow limit warnings for %d refusals, want 1:\n%s", len(warnings), sends-1, d.stderr)
	}
	flow, _ := warnings[0]["flow"].(map[string]any)
	if warnings[0]["counter"] != "Gateway.FlowLimit" || warnings[0]["value"] != 1.0 || warnings[0]["proto"] != "udp" ||
		warnings[0]["max_flows"] != 1.0 || flow["dst"] != inetAddr+":"+strconv.Itoa(port) {
		t.Errorf("warning %v\nwant counter Gateway.FlowLimit 1, udp to %s:%d, max_flows 1", warnings[0], inetAddr, port)
	}
	w.tapGone(t)
}
