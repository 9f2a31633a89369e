package rawtest_test

import (
	"testing"

	"github.com/gonetstack/gonet/internal/testkit/rawtest"
	"github.com/gonetstack/gonet/stack"
)

func TestNewReadsTheAnnouncementOfStackAddr(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	eth, a := rawtest.ARPOf(t, h.Announcement)
	if eth.DstMAC.String() != rawtest.BroadcastMAC.String() || a.Operation != 1 ||
		rawtest.Addr(a.SourceProtAddress) != rawtest.StackAddr || rawtest.Addr(a.DstProtAddress) != rawtest.StackAddr {
		t.Errorf("announcement %s", rawtest.Describe(h.Announcement))
	}
}

func TestBarrierReturnsWhatTheStackSentBeforeIt(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	h.LearnPeer(t)
	h.Inject(h.EchoFrame(t, 1, 1, []byte("x")), h.EchoFrame(t, 1, 2, []byte("y")))
	got := h.Barrier(t)
	if len(got) != 2 {
		t.Fatalf("barrier saw %d frames, want the 2 echo replies", len(got))
	}
	for i, f := range got {
		if _, m := rawtest.ICMPOf(t, f); m.TypeCode.Type() != 0 || m.Seq != uint16(i+1) {
			t.Errorf("frame %d: %s", i, rawtest.Describe(f))
		}
	}
	h.ExpectNothing(t)
}

func TestBarrierDoesNotAdvanceTheVirtualClock(t *testing.T) {
	h := rawtest.New(t, stack.Config{})
	before := h.Clock.Now()
	h.Barrier(t)
	if now := h.Clock.Now(); !now.Equal(before) {
		t.Errorf("clock moved from %v to %v", before, now)
	}
}
