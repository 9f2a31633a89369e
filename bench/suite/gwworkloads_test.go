package suite

import (
	"fmt"
	"slices"
	"testing"
)

// The gateway family measures every one of its workloads at every MTU of
// the plan: bulk both ways at each stream count, request-response,
// connections at each client count, UDP in each direction (and from the
// UDP source's runs) at each rate, and idle flows.
func TestGatewayGroupsMeasureEveryWorkloadAtEveryMTU(t *testing.T) {
	p := Full.Gateway
	want := map[string]int{
		gwBulk: 2 * len(p.BulkStreams),
		gwRR:   1,
		gwCRR:  len(p.CRRClients),
		gwUDP:  len(udpDirections) * len(p.UDPRates),
		gwIdle: 1,
	}
	got := map[string]map[int]int{} // workload, MTU: points
	var names []string
	for _, g := range (&Suite{Plan: Full}).gatewayGroups() {
		for _, pt := range g.points {
			w := pt.workloadOf(g)
			var mtu int
			if _, err := fmt.Sscanf(pt.name, "mtu=%d/", &mtu); err != nil {
				t.Fatalf("point %q of %s names no MTU", pt.name, w)
			}
			if got[w] == nil {
				got[w] = map[int]int{}
			}
			got[w][mtu]++
			names = append(names, w+" "+pt.name)
		}
	}
	for _, w := range gatewayWorkloads {
		for _, mtu := range p.MTUs {
			if got[w][mtu] != want[w] {
				t.Errorf("%s at MTU %d: %d points, want %d", w, mtu, got[w][mtu], want[w])
			}
		}
	}
	slices.Sort(names)
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] {
			t.Errorf("two points of one workload named alike: %q", names[i])
		}
	}
}
