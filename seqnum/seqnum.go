// Package seqnum is TCP sequence-number arithmetic modulo 2**32.
//
// RFC 9293 section 3.4: "the sequence number space is finite ... all
// arithmetic dealing with sequence numbers must be performed modulo 2**32",
// and comparisons are the serial number arithmetic of RFC 1982: v is less
// than w when w lies less than 2**31 ahead of v. The order holds only among
// numbers within 2**31 of each other, which TCP guarantees by keeping windows
// below 2**30 (RFC 7323 section 2.3).
package seqnum

// Value is a sequence number.
type Value uint32

// Size is a length or a window in sequence space.
type Size uint32

// LessThan reports whether v comes before w.
func (v Value) LessThan(w Value) bool { return int32(v-w) < 0 }

// LessThanEq reports whether v comes before w or is w.
func (v Value) LessThanEq(w Value) bool { return int32(v-w) <= 0 }

// GreaterThan reports whether v comes after w.
func (v Value) GreaterThan(w Value) bool { return int32(v-w) > 0 }

// GreaterThanEq reports whether v comes after w or is w.
func (v Value) GreaterThanEq(w Value) bool { return int32(v-w) >= 0 }

// InRange reports whether a <= v < b, going forward from a. It measures
// distances from a rather than comparing, so it is exact for any range
// shorter than 2**32; a range with b == a is empty.
func (v Value) InRange(a, b Value) bool { return v-a < b-a }

// InWindow reports whether first <= v < first+size: the test RFC 9293
// section 3.4 applies to each segment against the receive window. A window
// of size zero holds nothing.
func (v Value) InWindow(first Value, size Size) bool { return Size(v-first) < size }

// Add returns the number s past v.
func (v Value) Add(s Size) Value { return v + Value(s) }

// Sub returns how far v lies past w, for v at or after w.
func (v Value) Sub(w Value) Size { return Size(v - w) }

// Max returns whichever of a and b comes later.
func Max(a, b Value) Value {
	if a.LessThan(b) {
		return b
	}
	return a
}

// Min returns whichever of a and b comes earlier.
func Min(a, b Value) Value {
	if a.LessThan(b) {
		return a
	}
	return b
}

// Overlap reports whether the ranges [a, a+b) and [x, x+y) share a sequence
// number. Two arcs of the circle meet exactly when one starts inside the
// other, so the answer holds across the wrap for any sizes; an empty range
// overlaps nothing.
func Overlap(a Value, b Size, x Value, y Size) bool {
	return b != 0 && y != 0 && (a.InWindow(x, y) || x.InWindow(a, b))
}
