// Package relay joins a TAP device to a QEMU stream socket, frame for
// frame: how the gateway family drives gvisor-tap-vsock's gvproxy, which
// serves VMs over that socket (each frame behind a 32-bit big-endian
// length) and has no TAP device of its own. The kernel in the guest
// namespace then reaches gvproxy as a VM's virtio-net device would.
//
// It is GoNet's own link/tap and link/stream back to back, with no stack
// between them: the relay's cost is two reads and two writes a frame,
// which the suite counts with gvproxy's.
package relay

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/link/tap"
)

// Relay is a TAP device and a stream socket, joined.
type Relay struct {
	tap    *tap.Endpoint
	stream *stream.Endpoint
	mtu    int
}

// Open creates the TAP device dev in the calling thread's network
// namespace and connects to the QEMU stream socket at sock, both carrying
// frames of MTU mtu.
func Open(dev, sock string, mtu int) (*Relay, error) {
	// Plain frames on the TAP: the peer takes whole frames with complete
	// checksums, as a VM's NIC without offloads gives them.
	t, err := tap.Open(dev, tap.Options{MTU: mtu})
	if err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	s, err := stream.Dial(sock, stream.Options{MTU: mtu})
	if err != nil {
		t.Close()
		return nil, fmt.Errorf("relay: %w", err)
	}
	return &Relay{tap: t, stream: s, mtu: mtu}, nil
}

// Run copies frames both ways until either side ends or Close is called;
// after Close it returns nil.
func (r *Relay) Run() error {
	done := make(chan error, 2)
	go func() { done <- CopyFrames(r.stream, r.tap, r.mtu) }()
	go func() { done <- CopyFrames(r.tap, r.stream, r.mtu) }()
	err := <-done
	r.Close()
	if errors.Is(err, link.ErrClosed) {
		return nil
	}
	return fmt.Errorf("relay: %w", err)
}

// Close closes both sides.
func (r *Relay) Close() error {
	return errors.Join(r.tap.Close(), r.stream.Close())
}

// Main runs the relay with the command-line arguments args: it creates the
// TAP device (in the caller's network namespace), connects to the socket,
// prints "ready" and copies frames both ways until either side ends or a
// signal comes.
func Main(args []string) error {
	fs := flag.NewFlagSet("relay", flag.ContinueOnError)
	dev := fs.String("tap", "", "the TAP device to create")
	sock := fs.String("socket", "", "the QEMU stream socket to connect to (a path)")
	mtu := fs.Int("mtu", 1500, "MTU of both sides")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dev == "" || *sock == "" {
		return errors.New("relay: -tap and -socket are required")
	}
	r, err := Open(*dev, *sock, *mtu)
	if err != nil {
		return err
	}
	fmt.Println("ready")
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		<-sigs
		r.Close()
	}()
	return r.Run()
}

// CopyFrames moves batches of frames of up to mtu bytes of IP from src to
// dst until either fails: one direction of two endpoints joined with no
// stack between them (the relay's, and bench/pathemu's around its fault
// endpoint).
func CopyFrames(dst, src link.Endpoint, mtu int) error {
	pool := buffer.NewPool()
	pkts := make([]*buffer.Packet, buffer.MaxBatch)
	for i := range pkts {
		pkts[i] = pool.Get(link.MaxFrame(mtu))
	}
	for {
		for _, p := range pkts {
			p.Reset()
			p.SetLen(link.MaxFrame(mtu))
		}
		n, err := src.ReadBatch(pkts)
		if err != nil {
			return err
		}
		if _, err := dst.WriteBatch(pkts[:n]); err != nil {
			return err
		}
	}
}
