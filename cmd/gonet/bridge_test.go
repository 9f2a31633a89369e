package main

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gonetstack/gonet/link/shm"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/stack"
)

func TestBridgeRejectsBadFlagsWithExit2(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{}, "no ports"},
		{[]string{"-tap", "a", "-tap", "a"}, "given twice"},
		{[]string{"-tap", "a/b"}, "not a valid interface name"},
		{[]string{"-tap", "a", "-mtu", "20"}, "-mtu 20 is outside"},
		{[]string{"-tap", "a", "-ageing", "0s"}, "-ageing 0s"},
		{[]string{"-tap", "a", "-table-size", "0"}, "-table-size 0"},
		{[]string{"-tap", "a", "-queue", "0"}, "-queue 0"},
		{[]string{"-tap", "a", "-ring-size", "64"}, "-ring-size sizes the ring ports of -ring-listen"},
		{[]string{"-ring-listen", "/tmp/r.sock", "-ring-size", "100"}, "-ring-size 100 is not a power of two"},
		{[]string{"-tap", "a", "extra"}, "unexpected argument"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var stdout, stderr strings.Builder
			code := run(context.Background(), append([]string{"bridge"}, tt.args...), &stdout, &stderr)
			if code != exitUsage {
				t.Errorf("exit code %d, want %d", code, exitUsage)
			}
			if msg := stderr.String(); !strings.Contains(msg, tt.want) || strings.Count(msg, "\n") != 1 {
				t.Errorf("stderr %q, want one line with %q", msg, tt.want)
			}
		})
	}
}

// bridgeMsg is what the bridge tests echo through it.
var bridgeMsg = strings.Repeat("frames through the bridge. ", 10000)

// A stack that connects to -listen and one that listens where -connect
// points talk TCP through gonet bridge; when the listening one dies and
// another takes its socket, the bridge connects to that one; the control
// socket shows the ports, the stations and the counters.
func TestBridgeJoinsStacksOnSockets(t *testing.T) {
	dir := shortTempDir(t)
	listenPath := filepath.Join(dir, "br.sock")
	connectPath := filepath.Join(dir, "vm.sock")
	ctl := filepath.Join(dir, "ctl.sock")
	mac := net.HardwareAddr{2, 0, 0, 0, 0xb, 1}

	// The stack the bridge connects to is there first, as gonet up
	// -socket would be.
	epB, err := stream.Listen(connectPath, stream.Options{MAC: mac})
	if err != nil {
		t.Fatal(err)
	}
	b := peerStack(t, epB, stack.Config{}, "10.0.2.2/24")
	echo(t, b)

	br := startInProcess(t, "bridge", "-listen", listenPath, "-connect", connectPath, "-control", ctl, "-log-level", "debug")
	if line, want := br.readyLine(t), "gonet: bridge up "+listenPath+" "+connectPath; line != want {
		t.Fatalf("ready line %q, want %q", line, want)
	}

	epA, err := stream.Dial(listenPath, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := peerStack(t, epA, stack.Config{}, "10.0.2.100/24")
	defer a.Close()
	echoed(t, a, "10.0.2.2:7", bridgeMsg)

	// The peer dies; another takes its socket, with its MAC as a
	// restarted gonet up -mac would.
	b.Close()
	epB2, err := stream.Listen(connectPath, stream.Options{MAC: mac})
	if err != nil {
		t.Fatal(err)
	}
	b2 := peerStack(t, epB2, stack.Config{}, "10.0.2.2/24")
	defer b2.Close()
	echo(t, b2)
	echoed(t, a, "10.0.2.2:7", bridgeMsg)

	body, err := askControl(context.Background(), ctl, http.MethodGet, bridgeStatusPath, nil)
	if err != nil {
		t.Fatal(err)
	}
	var bi bridgeInfo
	if err := json.Unmarshal(body, &bi); err != nil {
		t.Fatal(err)
	}
	var ports []string
	for _, p := range bi.Ports {
		ports = append(ports, p.Name)
	}
	if strings.Join(ports, " ") != "connect0 listen1" {
		t.Errorf("ports %v, want connect0 and listen1", ports)
	}
	stations := map[string]string{}
	for _, s := range bi.Stations {
		stations[s.MAC] = s.Port
	}
	if stations[mac.String()] != "connect0" || stations[epA.MAC().String()] != "listen1" {
		t.Errorf("stations %v, want %v on connect0 and %v on listen1", stations, mac, epA.MAC())
	}
	st, err := fetchStatus(context.Background(), ctl)
	if err != nil {
		t.Fatal(err)
	}
	if st.Counters["Bridge.PortsLost"] != 1 || st.Counters["Port.listen1.RxFrames"] < 100 {
		t.Errorf("counters: Bridge.PortsLost %d, Port.listen1.RxFrames %d; want 1 and a transfer's",
			st.Counters["Bridge.PortsLost"], st.Counters["Port.listen1.RxFrames"])
	}

	rest := br.stop(t)
	if !strings.Contains(rest, "Bridge.Learnt ") || !strings.Contains(rest, "Port.connect0.TxFrames ") {
		t.Errorf("the counters printed on exit lack the bridge's or a port's:\n%s", rest)
	}
	if _, err := os.Lstat(listenPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the -listen socket outlived the bridge: %v", err)
	}
	if !strings.Contains(br.stderr.String(), "port failed; removed") {
		t.Errorf("the log does not tell of the port lost:\n%s", br.stderr.String())
	}
}

// GoNet stacks on shared-memory rings attached to -ring-listen talk TCP
// through the bridge, with a stack on a stream socket (-listen) beside
// them; a ring's stack that goes is a port lost, and the others go on.
func TestBridgeJoinsStacksOnRings(t *testing.T) {
	dir := shortTempDir(t)
	ringPath := filepath.Join(dir, "ring.sock")
	listenPath := filepath.Join(dir, "br.sock")
	ctl := filepath.Join(dir, "ctl.sock")
	br := startInProcess(t, "bridge", "-ring-listen", ringPath, "-listen", listenPath, "-control", ctl)
	if line, want := br.readyLine(t), "gonet: bridge up "+listenPath+" "+ringPath; line != want {
		t.Fatalf("ready line %q, want %q", line, want)
	}

	ringStack := func(addr string) *stack.Stack {
		ep, err := shm.Dial(ringPath, shm.Options{})
		if err != nil {
			t.Fatal(err)
		}
		return peerStack(t, ep, stack.Config{}, addr)
	}
	a := ringStack("10.0.3.1/24")
	defer a.Close()
	b := ringStack("10.0.3.2/24")
	echo(t, b)
	epC, err := stream.Dial(listenPath, stream.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := peerStack(t, epC, stack.Config{}, "10.0.3.3/24")
	defer c.Close()
	echo(t, c)

	echoed(t, a, "10.0.3.2:7", bridgeMsg)
	echoed(t, a, "10.0.3.3:7", bridgeMsg)
	b.Close()
	echoed(t, a, "10.0.3.3:7", bridgeMsg)

	st, err := fetchStatus(context.Background(), ctl)
	if err != nil {
		t.Fatal(err)
	}
	if st.Counters["Bridge.PortsLost"] != 1 || st.Counters["Port.ring1.RxFrames"] < 100 {
		t.Errorf("counters: Bridge.PortsLost %d, Port.ring1.RxFrames %d; want 1 and two transfers'",
			st.Counters["Bridge.PortsLost"], st.Counters["Port.ring1.RxFrames"])
	}
	br.stop(t)
	if _, err := os.Lstat(ringPath); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the -ring-listen socket outlived the bridge: %v", err)
	}
}
