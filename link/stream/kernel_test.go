//go:build linux

package stream_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gonetstack/gonet/buffer"
	"github.com/gonetstack/gonet/internal/netns"
	"github.com/gonetstack/gonet/internal/testkit/netnstest"
	"github.com/gonetstack/gonet/internal/testkit/stacktest"
	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/link/stream"
	"github.com/gonetstack/gonet/link/tap"
	"github.com/gonetstack/gonet/stack"
)

// The kernel's side plays the VM, in a namespace of the test's own.
var (
	vmAddr    = netip.MustParsePrefix("10.99.0.1/24")
	gonetAddr = netip.MustParsePrefix("10.99.0.2/24")
)

// vmRelay plays QEMU: it connects to the UNIX socket, as -netdev
// stream,server=off does, and relays frames between it and a TAP device
// whose kernel side is the "VM" in a test namespace. It frames the stream
// itself, apart from the endpoint's code, so that the test checks the
// endpoint against the format rather than against itself.
type vmRelay struct {
	conn net.Conn
	dev  *tap.Endpoint
	wg   sync.WaitGroup
	// errs holds why each direction stopped, other than the close.
	mu   sync.Mutex
	errs []error
}

func startRelay(t *testing.T, ns *netns.NS, path string, mtu int) {
	t.Helper()
	r := &vmRelay{}
	name := netns.DeviceName()
	err := ns.Do(func() error {
		var err error
		r.dev, err = tap.Open(name, tap.Options{MTU: mtu})
		return err
	})
	if err != nil {
		t.Fatalf("opening a TAP device in %s: %v", ns, err)
	}
	if err := ns.ConfigureLink(name, vmAddr, mtu); err != nil {
		r.dev.Close()
		t.Fatal(err)
	}
	if r.conn, err = net.Dial("unix", path); err != nil {
		r.dev.Close()
		t.Fatal(err)
	}
	r.wg.Add(2)
	go r.toStream(mtu)
	go r.fromStream(mtu)
	t.Cleanup(func() {
		r.conn.Close()
		r.dev.Close()
		r.wg.Wait()
		for _, err := range r.errs {
			t.Errorf("relay: %v", err)
		}
	})
}

func (r *vmRelay) fail(err error) {
	if errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
		return
	}
	r.mu.Lock()
	r.errs = append(r.errs, err)
	r.mu.Unlock()
}

// toStream sends what the VM's kernel sends, each frame behind its length.
func (r *vmRelay) toStream(mtu int) {
	defer r.wg.Done()
	pool := buffer.NewPool()
	pkts := make([]*buffer.Packet, 16)
	for i := range pkts {
		pkts[i] = pool.Get(link.MaxFrame(mtu))
		defer pkts[i].Release()
	}
	var out []byte
	for {
		for _, p := range pkts {
			p.Reset()
			p.SetLen(p.Cap())
		}
		n, err := r.dev.ReadBatch(pkts)
		if err != nil {
			r.fail(err)
			return
		}
		out = out[:0]
		for _, p := range pkts[:n] {
			out = binary.BigEndian.AppendUint32(out, uint32(p.Len()))
			out = append(out, p.Bytes()...)
		}
		if _, err := r.conn.Write(out); err != nil {
			r.fail(err)
			return
		}
	}
}

// fromStream hands the VM's kernel each frame the stream carries.
func (r *vmRelay) fromStream(mtu int) {
	defer r.wg.Done()
	br := bufio.NewReader(r.conn)
	pool := buffer.NewPool()
	p := pool.Get(link.MaxFrame(mtu))
	defer p.Release()
	var prefix [4]byte
	for {
		if _, err := io.ReadFull(br, prefix[:]); err != nil {
			r.fail(err)
			return
		}
		size := int(binary.BigEndian.Uint32(prefix[:]))
		if size > link.MaxFrame(mtu) {
			r.fail(errors.New("frame of " + strconv.Itoa(size) + " bytes over the MTU"))
			return
		}
		p.Reset()
		p.SetLen(size)
		if _, err := io.ReadFull(br, p.Bytes()); err != nil {
			r.fail(err)
			return
		}
		if _, err := r.dev.WriteBatch([]*buffer.Packet{p}); err != nil {
			r.fail(err)
			return
		}
	}
}

// A GoNet stack on a listening stream link and a Linux kernel behind a
// relay that speaks the framing (as QEMU would for a VM) ping each other
// and move data over TCP both ways, driven by the kernel's own ping and
// socat.
//
// The jumbo MTU is 65500, not passt's 65520: the relay's TAP device takes
// at most tap's limit, a 64 KiB buffer less the headers.
func TestKernelBehindARelayTalksToGoNet(t *testing.T) {
	for _, mtu := range []int{1500, 65500} {
		t.Run("mtu"+strconv.Itoa(mtu), func(t *testing.T) {
			ns := netnstest.New(t)
			netnstest.RequireTool(t, "ping")
			netnstest.RequireTool(t, "socat")
			dir := t.TempDir()
			path := filepath.Join(dir, "vm.sock")
			ep, err := stream.Listen(path, stream.Options{MTU: mtu})
			if err != nil {
				t.Fatal(err)
			}
			s := stack.New(stack.Config{})
			t.Cleanup(func() { stacktest.Closed(t, s) })
			if err := s.AddNIC("vm0", ep); err != nil {
				ep.Close()
				t.Fatal(err)
			}
			if err := s.AddAddress("vm0", gonetAddr); err != nil {
				t.Fatal(err)
			}
			startRelay(t, ns, path, mtu)

			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			out, err := ns.Run(ctx, "ping", "-c", "3", "-i", "0.2", "-W", "5", "-s", strconv.Itoa(mtu-28), gonetAddr.Addr().String())
			if err != nil {
				t.Fatalf("the kernel's ping of GoNet: %v", err)
			}
			if !strings.Contains(string(out), " 0% packet loss") {
				t.Errorf("the kernel's ping of GoNet:\n%s", out)
			}
			if _, err := s.Ping(ctx, vmAddr.Addr(), 1000); err != nil {
				t.Errorf("GoNet's ping of the kernel: %v", err)
			}

			data := make([]byte, 8<<20)
			rand.Read(data)
			want := sha256.Sum256(data)
			src := filepath.Join(dir, "upload")
			if err := os.WriteFile(src, data, 0o600); err != nil {
				t.Fatal(err)
			}

			// The kernel uploads to GoNet.
			ln, err := s.ListenTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), 5001))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			got := make(chan [32]byte, 1)
			go func() {
				defer close(got)
				c, err := ln.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				c.SetReadDeadline(time.Now().Add(60 * time.Second))
				h := sha256.New()
				io.Copy(h, c)
				got <- [32]byte(h.Sum(nil))
			}()
			if out, err := ns.Run(ctx, "socat", "-u", "OPEN:"+src, "TCP:"+gonetAddr.Addr().String()+":5001"); err != nil {
				t.Fatalf("socat upload: %v: %s", err, out)
			}
			if h := <-got; h != want {
				t.Errorf("GoNet received data with another SHA-256 than the kernel sent")
			}

			// GoNet serves a download to the kernel.
			ln2, err := s.ListenTCP(netip.AddrPortFrom(netip.IPv4Unspecified(), 5002))
			if err != nil {
				t.Fatal(err)
			}
			defer ln2.Close()
			go func() {
				c, err := ln2.Accept()
				if err != nil {
					return
				}
				defer c.Close()
				c.Write(data)
			}()
			dst := filepath.Join(dir, "download")
			if out, err := ns.Run(ctx, "socat", "-u", "TCP:"+gonetAddr.Addr().String()+":5002", "CREATE:"+dst); err != nil {
				t.Fatalf("socat download: %v: %s", err, out)
			}
			down, err := os.ReadFile(dst)
			if err != nil {
				t.Fatal(err)
			}
			if len(down) != len(data) || sha256.Sum256(down) != want {
				t.Errorf("the kernel downloaded %d bytes, want %d with the same SHA-256", len(down), len(data))
			}
			st := ep.Stats()
			if st.FramingErrors.Load() != 0 || st.RxErrors.Load() != 0 || st.TxErrors.Load() != 0 || st.Connects.Load() != 1 {
				t.Errorf("link counters: %v", linkCounters(ep))
			}
		})
	}
}
