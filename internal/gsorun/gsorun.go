// Package gsorun finds the runs of datagrams that UDP segmentation offload
// can carry as one: the kernel's UDP GSO (__udp_gso_segment) cuts every
// datagram but the last at the first's size, so a run is datagrams of the
// first's size and at most one shorter, which ends it. The gateway's relay
// sends such runs to a host socket (UDP_SEGMENT), the TAP writes them to
// the kernel (VIRTIO_NET_HDR_GSO_UDP_L4).
package gsorun

// Len is how many of n datagrams, from the first, one run can carry, their
// payload sizes given by size (ok false for one that cannot join a run at
// all): the first's size, and one shorter to end the run, within maxItems
// datagrams and maxBytes of payload in all. It is 1 when none can follow
// the first, or when the first cannot start a run (ok false, or empty).
func Len(n, maxItems, maxBytes int, size func(i int) (bytes int, ok bool)) int {
	first, ok := size(0)
	if !ok || first == 0 {
		return 1
	}
	k, total := 1, first
	for k < n && k < maxItems {
		l, ok := size(k)
		if !ok || l == 0 || l > first || total+l > maxBytes {
			break
		}
		k++
		total += l
		if l < first {
			break
		}
	}
	return k
}
