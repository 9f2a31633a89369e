package services

import (
	"context"
	"net"
	"time"
)

// Daytime is the daytime service (RFC 867) with a clock of its own choosing.
type Daytime struct {
	// Now tells the time; time.Now when nil. Tests set a fixed time.
	Now func() time.Time
}

// DaytimeLine formats t as the service sends it. RFC 867 leaves the syntax
// open ("there is no specific syntax for the daytime"); GoNet sends RFC 1123
// dates, as HTTP does, on one line ended by CRLF.
func DaytimeLine(t time.Time) string {
	return t.Format(time.RFC1123) + "\r\n"
}

// ServeUDP runs the UDP daytime service on conn: each datagram received,
// whatever it holds, is answered with DaytimeLine of the current time
// (RFC 867, "UDP Based Daytime Service"). It returns as ServeEchoUDP does.
func (d Daytime) ServeUDP(ctx context.Context, conn net.PacketConn) error {
	now := d.Now
	if now == nil {
		now = time.Now
	}
	return serveUDP(ctx, "daytime", conn, func([]byte, net.Addr) []byte {
		return []byte(DaytimeLine(now()))
	})
}

// ServeDaytimeUDP runs the UDP daytime service on conn with the wall clock;
// see Daytime.ServeUDP.
func ServeDaytimeUDP(ctx context.Context, conn net.PacketConn) error {
	return Daytime{}.ServeUDP(ctx, conn)
}
