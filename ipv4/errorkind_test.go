package ipv4_test

import (
	"testing"

	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/ipv4"
	"github.com/gonetstack/gonet/wire"
)

// ICMP's types and codes for the neutral error kinds (RFC 792, RFC 1812
// section 5.2.7.1), both ways.

func TestEveryErrorKindHasAnICMPMessageThatMapsBack(t *testing.T) {
	for k := ip.NetUnreachable; k <= ip.ParameterProblem; k++ {
		typ, code := ipv4.ICMPTypeCode(k)
		if back, ok := ipv4.ErrorKindOf(typ, code); !ok || back != k {
			t.Errorf("%v: type %d code %d maps back to %v, %v", k, typ, code, back, ok)
		}
	}
}

func TestErrorKindOfGroupsCodesAsLinux(t *testing.T) {
	tests := []struct {
		name      string
		typ, code uint8
		want      ip.ErrorKind
		ok        bool
	}{
		{"net unreachable", wire.ICMPDestUnreach, 0, ip.NetUnreachable, true},
		{"net unknown", wire.ICMPDestUnreach, 6, ip.NetUnreachable, true},
		{"net prohibited", wire.ICMPDestUnreach, 9, ip.NetUnreachable, true},
		{"net unreachable for TOS", wire.ICMPDestUnreach, 11, ip.NetUnreachable, true},
		{"host unreachable", wire.ICMPDestUnreach, 1, ip.HostUnreachable, true},
		{"source route failed", wire.ICMPDestUnreach, 5, ip.HostUnreachable, true},
		{"host unknown", wire.ICMPDestUnreach, 7, ip.HostUnreachable, true},
		{"host prohibited", wire.ICMPDestUnreach, 10, ip.HostUnreachable, true},
		{"an unassigned code", wire.ICMPDestUnreach, 99, ip.HostUnreachable, true},
		{"protocol unreachable", wire.ICMPDestUnreach, 2, ip.ProtoUnreachable, true},
		{"port unreachable", wire.ICMPDestUnreach, 3, ip.PortUnreachable, true},
		{"fragmentation needed", wire.ICMPDestUnreach, 4, ip.PacketTooBig, true},
		{"communication prohibited", wire.ICMPDestUnreach, 13, ip.AdminProhibited, true},
		{"TTL exceeded", wire.ICMPTimeExceeded, 0, ip.TimeExceeded, true},
		{"reassembly time exceeded", wire.ICMPTimeExceeded, 1, ip.ReassemblyTimeout, true},
		{"parameter problem", wire.ICMPParamProblem, 0, ip.ParameterProblem, true},
		{"echo reply is no error", wire.ICMPEchoReply, 0, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got, ok := ipv4.ErrorKindOf(tt.typ, tt.code); got != tt.want || ok != tt.ok {
				t.Errorf("ErrorKindOf(%d, %d) = %v, %v; want %v, %v", tt.typ, tt.code, got, ok, tt.want, tt.ok)
			}
		})
	}
}
