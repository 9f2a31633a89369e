package ipv6

import "testing"

// SHA-256 lands on a reserved identifier with odds of about 2^-40, so the
// retry of RFC 7217 section 5 and 6 is driven here with an F that does on
// purpose.
func TestReservedIIDMovesToTheNextDADCounter(t *testing.T) {
	anycast := IID{0xfd, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x80}
	ok := IID{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc, 0xde, 0xf0}
	for _, tc := range []struct {
		name        string
		reservedFor map[uint8]bool // counters whose F is reserved
		start       uint8
		want        uint8
		wantOK      bool
	}{
		{"first try not reserved", nil, 0, 0, true},
		{"first try reserved", map[uint8]bool{0: true}, 0, 1, true},
		{"two reserved after a DAD conflict", map[uint8]bool{2: true, 3: true}, 2, 4, true},
		{"reserved up to the last counter", map[uint8]bool{254: true}, 254, 255, true},
		{"no counter left", map[uint8]bool{255: true}, 255, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tried []uint8
			got, counter, found := firstUnreserved(tc.start, func(c uint8) IID {
				tried = append(tried, c)
				if tc.reservedFor[c] {
					return anycast
				}
				return ok
			})
			if found != tc.wantOK {
				t.Fatalf("firstUnreserved found = %v, want %v (tried %v)", found, tc.wantOK, tried)
			}
			if !found {
				return
			}
			if got != ok || counter != tc.want {
				t.Errorf("firstUnreserved from %d = %v with counter %d, want %v with %d (tried %v)", tc.start, got, counter, ok, tc.want, tried)
			}
			if want := int(tc.want-tc.start) + 1; len(tried) != want {
				t.Errorf("tried counters %v, want %d of them in order from %d", tried, want, tc.start)
			}
		})
	}
}
