package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/netip"
	"syscall"
	"testing"
	"time"

	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/stack"
	"github.com/gonetstack/gonet/tcp"
)

// relayRig is a guest stack and a gateway stack joined by an in-memory
// wire, and a host server on loopback: a guest connection to the gateway's
// port is relayed to the host server, as a forwarded flow will be.
type relayRig struct {
	guest *tcp.Conn // the guest's end, in the guest stack
	host  *net.TCPConn
	st    *RelayStats
	gw    *stack.Stack  // the gateway's stack, which relays
	done  chan struct{} // closed when relayTCP has returned
}

// newRelayRig relays one flow and returns with both ends connected.
func newRelayRig(t *testing.T) *relayRig {
	t.Helper()
	guestStack, gw := stacktest.Pair(t, stacktest.Options{})
	hl, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer hl.Close()
	gl, err := gw.ListenTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), 80))
	if err != nil {
		t.Fatal(err)
	}
	defer gl.Close()
	r := &relayRig{st: &RelayStats{}, gw: gw, done: make(chan struct{})}
	// The rig returns once the relay's dial has returned: a reset by the
	// host before that would fail the dial, not test the relay.
	dialed := make(chan struct{})
	go func() {
		defer close(r.done)
		c, err := gl.Accept()
		if err != nil {
			return
		}
		h, err := net.DialTCP("tcp", nil, hl.Addr().(*net.TCPAddr))
		if err != nil {
			c.Close()
			return
		}
		close(dialed)
		relayTCP(c.(*tcp.Conn), h, r.st, &flowRecord{})
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.guest, err = guestStack.DialTCP(ctx, netip.AddrPortFrom(stacktest.AddrB.Addr(), 80))
	if err != nil {
		t.Fatal(err)
	}
	hl.SetDeadline(time.Now().Add(5 * time.Second))
	r.host, err = hl.AcceptTCP()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-dialed:
	case <-r.done:
		t.Fatal("the relay's dial failed")
	}
	deadline := time.Now().Add(20 * time.Second)
	r.guest.SetDeadline(deadline)
	r.host.SetDeadline(deadline)
	t.Cleanup(func() {
		r.guest.Close()
		r.host.Close()
		select {
		case <-r.done:
		case <-time.After(10 * time.Second):
			t.Error("the relay did not end")
		}
		if n := r.st.TCPActive.Load(); n != 0 {
			t.Errorf("TCPActive = %d after the flow, want 0", n)
		}
	})
	return r
}

// wait returns once relayTCP has returned.
func (r *relayRig) wait(t *testing.T) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatal("the relay did not end")
	}
}

// bulk sends size random bytes from src and checks what dst reads up to
// src's FIN.
func bulk(t *testing.T, src io.WriteCloser, closeWrite func() error, dst io.Reader, size int) {
	t.Helper()
	data := make([]byte, size)
	rand.Read(data)
	errc := make(chan error, 1)
	go func() {
		_, err := src.Write(data)
		if err == nil {
			err = closeWrite()
		}
		errc <- err
	}()
	h := sha256.New()
	n, err := io.Copy(h, dst)
	if err != nil {
		t.Fatalf("read after %d bytes: %v", n, err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	want := sha256.Sum256(data)
	if n != int64(size) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("%d bytes arrived as %d, sha256 equal %v", size, n, bytes.Equal(h.Sum(nil), want[:]))
	}
}

func TestRelayCarriesBothDirectionsAndTheirFINs(t *testing.T) {
	r := newRelayRig(t)
	const size = 8 << 20
	bulk(t, r.guest, r.guest.CloseWrite, r.host, size)
	bulk(t, r.host, r.host.CloseWrite, r.guest, size)
	r.wait(t)
	for name, got := range map[string]uint64{
		"BytesToHost": r.st.BytesToHost.Load(), "BytesToGuest": r.st.BytesToGuest.Load(),
		"FinsToHost": r.st.FinsToHost.Load(), "FinsToGuest": r.st.FinsToGuest.Load(),
		"ResetsFromGuest": r.st.ResetsFromGuest.Load(), "ResetsFromHost": r.st.ResetsFromHost.Load(),
	} {
		want := map[string]uint64{"BytesToHost": size, "BytesToGuest": size, "FinsToHost": 1, "FinsToGuest": 1}[name]
		if got != want {
			t.Errorf("%s = %d, want %d", name, got, want)
		}
	}
}

func TestRelayHalfClose(t *testing.T) {
	tests := []struct {
		name string
		// first closes its sending side and then reads; second reads
		// to the FIN, answers and closes.
		first, second func(r *relayRig) (w io.Writer, closeWrite func() error, rd io.Reader)
	}{
		{"the guest closes first", func(r *relayRig) (io.Writer, func() error, io.Reader) {
			return r.guest, r.guest.CloseWrite, r.guest
		}, func(r *relayRig) (io.Writer, func() error, io.Reader) {
			return r.host, r.host.CloseWrite, r.host
		}},
		{"the host closes first", func(r *relayRig) (io.Writer, func() error, io.Reader) {
			return r.host, r.host.CloseWrite, r.host
		}, func(r *relayRig) (io.Writer, func() error, io.Reader) {
			return r.guest, r.guest.CloseWrite, r.guest
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRelayRig(t)
			w1, cw1, rd1 := tt.first(r)
			w2, cw2, rd2 := tt.second(r)
			if _, err := w1.Write([]byte("request")); err != nil {
				t.Fatal(err)
			}
			if err := cw1(); err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(rd2); err != nil || string(got) != "request" {
				t.Fatalf("the other side read %q, %v; want the request and its FIN", got, err)
			}
			// The half-closed side still receives.
			if _, err := w2.Write([]byte("answer")); err != nil {
				t.Fatal(err)
			}
			if err := cw2(); err != nil {
				t.Fatal(err)
			}
			if got, err := io.ReadAll(rd1); err != nil || string(got) != "answer" {
				t.Fatalf("the half-closed side read %q, %v; want the answer and its FIN", got, err)
			}
			r.wait(t)
		})
	}
}

func TestRelayCarriesResets(t *testing.T) {
	tests := []struct {
		name    string
		reset   func(r *relayRig)
		read    func(r *relayRig) error // the other side's read
		counter func(st *RelayStats) uint64
	}{
		{"from the host to the guest", func(r *relayRig) {
			r.host.SetLinger(0)
			r.host.Close()
		}, func(r *relayRig) error {
			_, err := io.ReadAll(r.guest)
			return err
		}, func(st *RelayStats) uint64 { return st.ResetsFromHost.Load() }},
		{"from the guest to the host", func(r *relayRig) {
			r.guest.SetLinger(0)
			r.guest.Close()
		}, func(r *relayRig) error {
			_, err := io.ReadAll(r.host)
			return err
		}, func(st *RelayStats) uint64 { return st.ResetsFromGuest.Load() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRelayRig(t)
			tt.reset(r)
			if err := tt.read(r); !errors.Is(err, syscall.ECONNRESET) {
				t.Fatalf("the other side's read: %v, want ECONNRESET (FinsToGuest %d FinsToHost %d ResetsFromHost %d ResetsFromGuest %d)", err, r.st.FinsToGuest.Load(), r.st.FinsToHost.Load(), r.st.ResetsFromHost.Load(), r.st.ResetsFromGuest.Load())
			}
			r.wait(t)
			if n := tt.counter(r.st); n != 1 {
				t.Fatalf("reset counted %d times, want 1", n)
			}
		})
	}
}

// The stack's own checks (every buffer back, no goroutine left) run at the
// end of each test through stacktest.Pair; this one also holds a flow idle.
func TestRelayIdleFlowHoldsNoBuffer(t *testing.T) {
	r := newRelayRig(t)
	if _, err := r.host.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(r.guest, b); err != nil {
		t.Fatal(err)
	}
	if _, err := r.guest.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r.host, b); err != nil {
		t.Fatal(err)
	}
	// Both directions now wait: guest to host in WriteTo, on GoNet's
	// readable signal; host to guest in the poller, once its read into
	// GoNet's send buffer found nothing more and gave back the chunks it
	// had reserved for it. The gateway's stack then holds only what the
	// connection itself is charged, no data.
	deadline := time.Now().Add(5 * time.Second)
	for r.st.BuffersHeld.Load() != 0 || r.gw.Budget().Used() != int64(tcp.ConnMemory) {
		if time.Now().After(deadline) {
			t.Fatalf("an idle flow holds %d relay buffers and %d bytes of the gateway's budget (the connection is charged %d)",
				r.st.BuffersHeld.Load(), r.gw.Budget().Used(), tcp.ConnMemory)
		}
		time.Sleep(time.Millisecond)
	}
}
