package integration

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// Offloads across the TAP device (tap.Options.Offload): 50 MiB each way
// between GoNet and a kernel socket, with the offloads on (the harness's
// default) and off, checked by SHA-256; with them on, the counters must
// show that super-segments and partial checksums crossed the TAP both ways,
// and that GoNet's payload was written from its send buffer, so that a
// silent fallback to plain frames or copies fails the test.

func TestOffloadBulkToKernel(t *testing.T) {
	for _, tt := range []struct {
		name    string
		offload bool
	}{{"offloads on", true}, {"offloads off", false}} {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			h := newHost(t, options{noOffload: !tt.offload})
			defer h.logCounters(t, false)
			h.bulkToKernel(t, 11, "GoNet to kernel, "+tt.name)
			h.checkOffloadCounters(t, tt.offload, "Tx")
		})
	}
}

func TestOffloadBulkFromKernel(t *testing.T) {
	for _, tt := range []struct {
		name    string
		offload bool
	}{{"offloads on", true}, {"offloads off", false}} {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			h := newHost(t, options{noOffload: !tt.offload})
			defer h.logCounters(t, false)
			h.bulkFromKernel(t, 12, "kernel to GoNet, "+tt.name)
			h.checkOffloadCounters(t, tt.offload, "Rx")
		})
	}
}

// checkOffloadCounters checks the TAP's offload counters in one direction
// ("Tx" or "Rx"): super-segments and partial checksums with the offloads
// on, none with them off. It logs the counters that show what happened.
func (h *host) checkOffloadCounters(t *testing.T, on bool, dir string) {
	t.Helper()
	st := h.tap.Stats()
	var gso, csum, frames uint64
	var m map[string]int64
	// The TAP counts a frame as it writes it, the NIC once the batch it
	// is in has been written: while the connection still sends (its FIN,
	// a loss probe) the two differ by what is in flight, so read until
	// they agree.
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(time.Millisecond) {
		if dir == "Tx" {
			gso, csum, frames = st.TxGSO.Load(), st.TxCsumPartial.Load(), st.TxFrames.Load()
		} else {
			gso, csum, frames = st.RxGSO.Load(), st.RxCsumPartial.Load(), st.RxFrames.Load()
		}
		m = h.stack.Counters()
		if m["NIC."+h.dev+"."+dir+"GSO"] == int64(gso) || time.Now().After(deadline) {
			break
		}
	}
	var sb strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if v := m[k]; v != 0 && (strings.Contains(k, "GSO") || strings.Contains(k, "Copied") || k == "TCP.OutSegs" || k == "TCP.InSegs" ||
			k == "TCP.InQueueDrops" || k == "TCP.RetransSegs" || k == "TCP.InCsumErrors") {
			fmt.Fprintf(&sb, " %s=%d", k, v)
		}
	}
	t.Logf("TAP %s: %d frames, %d super-segments, %d partial checksums, %d gathered;%s", dir, frames, gso, csum, st.TxGathered.Load(), sb.String())
	switch {
	case on && (gso == 0 || csum == 0):
		t.Errorf("offloads on: %d super-segments and %d partial checksums crossed the TAP (%s), want some of each", gso, csum, dir)
	case !on && (gso != 0 || csum != 0):
		t.Errorf("offloads off: %d super-segments and %d partial checksums crossed the TAP (%s), want none", gso, csum, dir)
	}
	// With them on, TCP's payload goes from its send buffer to the TAP
	// without a copy into the frame (link.Capabilities.TxGather), and
	// nothing on the way reads it into place.
	if gathered := st.TxGathered.Load(); dir == "Tx" && on != (gathered != 0) {
		t.Errorf("offloads on: %v; %d frames written from the send buffer's loans", on, gathered)
	}
	// The stack's own counters (gonet stats) agree with the TAP's.
	if nic := m["NIC."+h.dev+"."+dir+"GSO"]; nic != int64(gso) {
		t.Errorf("NIC.%s.%sGSO = %d, the TAP counted %d super-segments", h.dev, dir, nic, gso)
	}
	if n := m["TCP.InCsumErrors"]; n != 0 {
		t.Errorf("TCP.InCsumErrors = %d, want 0", n)
	}
}
