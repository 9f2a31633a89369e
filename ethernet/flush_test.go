package ethernet_test

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/ethernet"
	"github.com/gonetstack/gonet/link/pipe"
	"github.com/gonetstack/gonet/wire"
)

// Flush returns once what Send queued before it is written: the frames
// are on the wire, not in the NIC's queue.
func TestFlushWaitsForTheFramesQueuedBefore(t *testing.T) {
	a, b := pipe.New(1500, net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2})
	defer b.Close()
	pool := buffer.NewPool()
	n, err := ethernet.NewNIC("n0", a, pool)
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	const frames = 200 // within the pipe's queue
	for range frames {
		n.Send(wire.MAC{2, 0, 0, 0, 0, 2}, 0x88b5, pool.Get(100))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := n.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := n.Stats.TxFrames.Load(); got != frames {
		t.Errorf("TxFrames = %d after Flush, want %d", got, frames)
	}
	if got := b.Queued(); got != frames {
		t.Errorf("the peer holds %d frames after Flush, want %d", got, frames)
	}
	// Nothing queued: at once.
	if err := n.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n.Close()
}
