package load

import (
	"os"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/netnstest"
)

// The pinger answers over both families: ICMP and ICMPv6 datagram sockets
// in a namespace of the test's own, to its loopback.
func TestPingIsAnsweredOverBothFamilies(t *testing.T) {
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
		})
	}
}

// writeSysctl sets /proc/sys/NAME for the calling thread's namespace.
func writeSysctl(name, value string) error {
	return os.WriteFile("/proc/sys/"+name, []byte(value), 0o644)
}
