package server

import (
	"strings"
	"testing"
)

// -addr is the IPv4 address and -addr6 the IPv6 one: a server given them
// the wrong way round says so before it sets anything up.
func TestMainRejectsAnAddressOfTheWrongFamily(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-stack", "kernel", "-addr", "fd77::2/64"}, "-addr fd77::2/64: not an IPv4 address"},
		{[]string{"-stack", "kernel", "-addr", "10.77.0.2/24", "-addr6", "10.77.0.3/24"}, "-addr6 10.77.0.3/24: not an IPv6 address"},
		{[]string{"-stack", "kernel", "-addr", "10.77.0.2/24", "-addr6", "::ffff:10.77.0.3/120"}, "not an IPv6 address"},
		{[]string{"-stack", "kernel", "-addr", "10.77.0.2/24", "-addr6", "fd77::2"}, "-addr6:"},
	} {
		err := Main(c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Main(%q) = %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
