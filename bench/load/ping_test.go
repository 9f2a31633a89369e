package load

import (
	"os"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/netnstest"
)

// The pinger answers over both families: ICMP and ICMPv6 datagram sockets
// in a namespace of the test's own, to its loopback. Each reply is timed
// at the device too (the loopback driver stamps what it carries, as the
// TAP driver and veth do), within the round trip the pinger saw.
func TestPingIsAnsweredAndTimedAtTheDeviceOverBothFamilies(t *testing.T) {
	ns := netnstest.New(t)
	if err := ns.Do(func() error { return writeSysctl("net/ipv4/ping_group_range", "0 2147483647") }); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"127.0.0.1", "::1"} {
		t.Run(addr, func(t *testing.T) {
			var r PingResult
			err := ns.Do(func() (err error) {
				r, err = Ping(addr, 2, 10*time.Millisecond, 100*time.Millisecond)
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			if r.Sent == 0 || r.RTT.Samples != r.Sent || r.Lost != 0 {
				t.Errorf("%+v: want every request answered", r)
			}
			if r.Wire.Samples != r.RTT.Samples || r.Wire.MeanUS <= 0 || r.Wire.MaxUS > r.RTT.MaxUS {
				t.Errorf("wire %+v, round trip %+v: want every reply timed at the device, within its round trip", r.Wire, r.RTT)
			}
		})
	}
}

// Twin pingers take the two addresses in turn, one echo each, and report
// each address's round trips apart: as many requests to one as to the
// other (give or take each pinger's last), every one answered and timed.
func TestPingTwinsTakeTheAddressesInTurn(t *testing.T) {
	ns := netnstest.New(t)
	if err := ns.Do(func() error { return writeSysctl("net/ipv4/ping_group_range", "0 2147483647") }); err != nil {
		t.Fatal(err)
	}
	const pingers = 2
	var r PingResult
	if err := ns.Do(func() (err error) {
		r, err = PingTwins("::1", "127.0.0.1", pingers, 10*time.Millisecond, 200*time.Millisecond)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if r.Twin == nil {
		t.Fatalf("%+v: no twin result", r)
	}
	for _, res := range []PingResult{r, *r.Twin} {
		if res.Sent == 0 || res.RTT.Samples != res.Sent || res.Lost != 0 || res.Wire.Samples != res.Sent {
			t.Errorf("%+v: want every request answered and timed at the device", res)
		}
	}
	if d := r.Sent - r.Twin.Sent; d < 0 || d > pingers {
		t.Errorf("%d requests to the first address, %d to the twin: want the first's turn to come first, one each", r.Sent, r.Twin.Sent)
	}
}

// In a closed loop each pinger sends as its reply arrives: far more
// replies than a 10 ms pace would give, and none lost.
func TestClosedLoopPingSendsOnEachReply(t *testing.T) {
	ns := netnstest.New(t)
	if err := ns.Do(func() error { return writeSysctl("net/ipv4/ping_group_range", "0 2147483647") }); err != nil {
		t.Fatal(err)
	}
	const pingers, dur = 2, 100 * time.Millisecond
	var r PingResult
	if err := ns.Do(func() (err error) {
		r, err = Ping("127.0.0.1", pingers, 0, dur)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if paced := pingers * int(dur/(10*time.Millisecond)); r.RTT.Samples <= 2*paced || r.Lost != 0 {
		t.Errorf("%+v: want more than %d replies (twice a 10 ms pace's), none lost", r, 2*paced)
	}
	if r.RepliesPerS <= 0 {
		t.Errorf("%+v: no reply rate", r)
	}
}

// writeSysctl sets /proc/sys/NAME for the calling thread's namespace.
func writeSysctl(name, value string) error {
	return os.WriteFile("/proc/sys/"+name, []byte(value), 0o644)
}
