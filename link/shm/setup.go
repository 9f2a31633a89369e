package shm

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gonetstack/gonet/link"
	"github.com/gonetstack/gonet/stats"
)

// The handshake, over a UNIX seqpacket socket (each message whole):
//
//	dialler → listener   hello:   what the dialler wants (MTU, MAC, offloads)
//	listener → dialler   welcome: the agreed link and the memory's geometry,
//	                     with the memfd and the two eventfds (SCM_RIGHTS);
//	                     or a refusal, with no descriptors
//	dialler → listener   ready:   the memory is mapped and checked
//
// Every message is one msgLen-byte record. The listener's Accept returns
// only after ready, so an endpoint it returns has a peer that got as far
// as mapping the memory.
const (
	msgLen = 48

	msgMagic    = 0  // uint64: magic
	msgVersion  = 8  // uint16
	msgKind     = 10 // uint8: kindHello, kindWelcome, kindReady
	msgStatus   = 11 // uint8: statusOK or why the listener refused
	msgMTU      = 12 // uint32
	msgMAC      = 16 // 6 bytes
	msgOffload  = 22 // uint8: 1 when offered (hello) or agreed (welcome)
	msgRingSize = 24 // uint32, welcome only
	msgDataSize = 28 // uint32, welcome only
)

const (
	kindHello = iota + 1
	kindWelcome
	kindReady
)

// Why a listener refuses a dialler.
const (
	statusOK = iota
	statusVersion
	statusMTU
)

// handshakeTimeout bounds each side's wait for the other's messages, so
// that a peer that connects and says nothing cannot hold a listener.
var handshakeTimeout = 5 * time.Second

// message is a handshake message, decoded.
type message struct {
	kind, status       uint8
	version            uint16
	mtu                uint32
	mac                net.HardwareAddr
	offload            bool
	ringSize, dataSize uint32
}

func (m message) encode() []byte {
	b := make([]byte, msgLen)
	binary.LittleEndian.PutUint64(b[msgMagic:], magic)
	binary.LittleEndian.PutUint16(b[msgVersion:], m.version)
	b[msgKind], b[msgStatus] = m.kind, m.status
	binary.LittleEndian.PutUint32(b[msgMTU:], m.mtu)
	copy(b[msgMAC:msgMAC+6], m.mac)
	if m.offload {
		b[msgOffload] = 1
	}
	binary.LittleEndian.PutUint32(b[msgRingSize:], m.ringSize)
	binary.LittleEndian.PutUint32(b[msgDataSize:], m.dataSize)
	return b
}

// decodeMessage decodes a message of the kind wanted.
func decodeMessage(b []byte, kind uint8) (message, error) {
	if len(b) != msgLen || binary.LittleEndian.Uint64(b[msgMagic:]) != magic {
		return message{}, fmt.Errorf("handshake: not a GoNet shared-memory message (%d bytes)", len(b))
	}
	m := message{
		version:  binary.LittleEndian.Uint16(b[msgVersion:]),
		kind:     b[msgKind],
		status:   b[msgStatus],
		mtu:      binary.LittleEndian.Uint32(b[msgMTU:]),
		mac:      net.HardwareAddr(append([]byte(nil), b[msgMAC:msgMAC+6]...)),
		offload:  b[msgOffload] == 1,
		ringSize: binary.LittleEndian.Uint32(b[msgRingSize:]),
		dataSize: binary.LittleEndian.Uint32(b[msgDataSize:]),
	}
	if m.kind != kind {
		return m, fmt.Errorf("handshake: message of kind %d, want %d", m.kind, kind)
	}
	return m, nil
}

// ListenerStats are a Listener's counters.
type ListenerStats struct {
	Accepted stats.Counter // links set up
	// Refused counts diallers whose handshake failed: another version or
	// MTU, a malformed message, one that timed out.
	Refused stats.Counter
}

// Listener hands out a link to each peer that dials its socket.
type Listener struct {
	path  string
	ln    *net.UnixListener
	opts  Options
	stats ListenerStats
}

// Listen listens on a UNIX socket at path for peers to Dial. The socket
// file is removed on Close; a file already at path is an error, not
// replaced. opts give every link accepted its MTU, offloads and sizes; a
// nil MAC gives each link a random one.
func Listen(path string, opts Options) (*Listener, error) {
	o, err := opts.resolve()
	if err == nil {
		err = o.geometry().check(maxFrame(o.MTU, o.Offload))
	}
	if err != nil {
		return nil, fmt.Errorf("shm %s: %w", path, err)
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("shm %s: %w", path, err)
	}
	return &Listener{path: path, ln: ln, opts: o}, nil
}

// Accept waits for a peer and sets up a link with it. An error from a
// peer's handshake (counted in Stats().Refused) leaves the listener
// listening: call Accept again. Once the listener is closed, the error
// wraps net.ErrClosed.
func (l *Listener) Accept() (*Endpoint, error) {
	conn, err := l.ln.AcceptUnix()
	if err != nil {
		return nil, fmt.Errorf("shm %s: accept: %w", l.path, err)
	}
	e, err := l.handshake(conn)
	if err != nil {
		l.stats.Refused.Inc()
		conn.Close()
		return nil, fmt.Errorf("shm %s: %w", l.path, err)
	}
	l.stats.Accepted.Inc()
	return e, nil
}

// Close stops listening and removes the socket file. Links already
// accepted are not affected.
func (l *Listener) Close() error { return l.ln.Close() }

// Addr returns the socket's address.
func (l *Listener) Addr() net.Addr { return l.ln.Addr() }

// Stats returns the listener's live counters.
func (l *Listener) Stats() *ListenerStats { return &l.stats }

// handshake is the listener's side: hello in, memory made, welcome out,
// ready in.
func (l *Listener) handshake(conn *net.UnixConn) (*Endpoint, error) {
	conn.SetDeadline(time.Now().Add(handshakeTimeout))
	b := make([]byte, msgLen+1)
	// A plain read takes no descriptors: any the dialler sends are
	// discarded by the kernel, not installed here.
	n, err := conn.Read(b)
	if err != nil {
		return nil, fmt.Errorf("reading the hello: %w", err)
	}
	hello, err := decodeMessage(b[:n], kindHello)
	if err != nil {
		return nil, err
	}
	o := l.opts
	refuse := func(status uint8, err error) (*Endpoint, error) {
		conn.Write(message{kind: kindWelcome, version: version, status: status, mtu: uint32(o.MTU)}.encode())
		return nil, err
	}
	if hello.version != version {
		return refuse(statusVersion, fmt.Errorf("dialler speaks version %d, not %d", hello.version, version))
	}
	if int(hello.mtu) != o.MTU {
		return refuse(statusMTU, fmt.Errorf("dialler's MTU %d differs from ours, %d", hello.mtu, o.MTU))
	}
	if _, err := link.HardwareAddr(hello.mac); err != nil {
		return nil, fmt.Errorf("dialler's %w", err)
	}
	if o.MAC, err = link.HardwareAddr(o.MAC); err != nil {
		return nil, err
	}
	offload := hello.offload && o.Offload
	g := o.geometry()

	mem, fds, err := makeMemory(g)
	if err != nil {
		return nil, err
	}
	// fds[0] is the memfd, fds[1:] the eventfds of rings 0 and 1.
	closeFds := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	welcome := message{kind: kindWelcome, version: version, mtu: uint32(o.MTU), mac: o.MAC, offload: offload,
		ringSize: g.ringSize, dataSize: g.dataSize}
	if _, _, err := conn.WriteMsgUnix(welcome.encode(), unix.UnixRights(fds[:]...), nil); err != nil {
		unix.Munmap(mem)
		closeFds()
		return nil, fmt.Errorf("sending the welcome: %w", err)
	}
	unix.Close(fds[0]) // the mapping holds the memory
	n, err = conn.Read(b)
	if err == nil {
		_, err = decodeMessage(b[:n], kindReady)
	}
	if err != nil {
		unix.Munmap(mem)
		unix.Close(fds[1])
		unix.Close(fds[2])
		return nil, fmt.Errorf("waiting for the dialler's ready: %w", err)
	}
	conn.SetDeadline(time.Time{})
	return newEndpoint("shm "+l.path, listenerRole, conn, mem, g, [2]int{fds[1], fds[2]}, o, hello.mac, offload)
}

// makeMemory creates the shared memory of geometry g, sealed at its size,
// and maps it; and the eventfds of the two rings, non-blocking so that
// both sides can put them in Go's poller (the flag belongs to the file,
// which both processes share).
func makeMemory(g geometry) (mem []byte, fds [3]int, err error) {
	fd, err := unix.MemfdCreate("gonet-shm", unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return nil, fds, fmt.Errorf("memfd_create: %w", err)
	}
	fail := func(what string, err error) ([]byte, [3]int, error) {
		unix.Close(fd)
		if mem != nil {
			unix.Munmap(mem)
		}
		for _, e := range fds[1:] {
			if e > 0 {
				unix.Close(e)
			}
		}
		return nil, [3]int{}, fmt.Errorf("%s: %w", what, err)
	}
	if err := unix.Ftruncate(fd, int64(g.size())); err != nil {
		return fail("sizing the shared memory", err)
	}
	// Sealed against shrinking, a mapping cannot fault with SIGBUS
	// beyond a truncated end, whatever the peer does with its
	// descriptor; F_SEAL_SEAL keeps the seals as they are.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("sealing the shared memory", err)
	}
	if mem, err = unix.Mmap(fd, 0, g.size(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail("mapping the shared memory", err)
	}
	g.writeHeader(mem)
	for i := 1; i < 3; i++ {
		if fds[i], err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
			return fail("eventfd", err)
		}
	}
	fds[0] = fd
	return mem, fds, nil
}

// Dial connects to the Listener at path and sets up a link. opts.MTU must
// be the listener's; the link has offloads when both sides offer them.
func Dial(path string, opts Options) (*Endpoint, error) {
	name := "shm " + path
	o, err := opts.resolve()
	if err == nil {
		o.MAC, err = link.HardwareAddr(o.MAC)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	e, err := dialHandshake(name, conn, o)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return e, nil
}

// dialHandshake is the dialler's side: hello out, welcome and descriptors
// in, memory checked and mapped, ready out. The listener is not trusted
// any more than a peer is later: the memory must be a memfd sealed
// against shrinking, as large as the geometry says, with the header the
// welcome announced.
func dialHandshake(name string, conn *net.UnixConn, o Options) (*Endpoint, error) {
	conn.SetDeadline(time.Now().Add(handshakeTimeout))
	hello := message{kind: kindHello, version: version, mtu: uint32(o.MTU), mac: o.MAC, offload: o.Offload}
	if _, err := conn.Write(hello.encode()); err != nil {
		return nil, fmt.Errorf("sending the hello: %w", err)
	}
	b := make([]byte, msgLen+1)
	oob := make([]byte, unix.CmsgSpace(4*4)) // room for one descriptor more than expected, to see it
	n, oobn, _, _, err := conn.ReadMsgUnix(b, oob)
	if err != nil {
		return nil, fmt.Errorf("reading the welcome: %w", err)
	}
	fds, err := parseRights(oob[:oobn])
	closeFds := func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}
	defer func() { closeFds() }()
	if err != nil {
		return nil, err
	}
	w, err := decodeMessage(b[:n], kindWelcome)
	switch {
	case err != nil:
		return nil, err
	case w.version != version:
		return nil, fmt.Errorf("listener speaks version %d, not %d", w.version, version)
	case w.status == statusMTU || int(w.mtu) != o.MTU:
		return nil, fmt.Errorf("listener's MTU %d differs from ours, %d", w.mtu, o.MTU)
	case w.status != statusOK:
		return nil, fmt.Errorf("listener refused the link (status %d)", w.status)
	case len(fds) != 3:
		return nil, fmt.Errorf("welcome carried %d descriptors, want 3", len(fds))
	case w.offload && !o.Offload:
		return nil, errors.New("listener agreed to offloads this side did not offer")
	}
	if _, err := link.HardwareAddr(w.mac); err != nil {
		return nil, fmt.Errorf("listener's %w", err)
	}
	g := geometry{ringSize: w.ringSize, dataSize: w.dataSize}
	if err := g.check(maxFrame(o.MTU, w.offload)); err != nil {
		return nil, fmt.Errorf("listener's geometry: %w", err)
	}
	mem, err := mapPeerMemory(fds[0], g)
	if err != nil {
		return nil, err
	}
	if err := g.checkHeader(mem); err != nil {
		unix.Munmap(mem)
		return nil, err
	}
	efds := [2]int{fds[1], fds[2]}
	for _, fd := range efds {
		// Non-blocking, whatever the listener made, so that the poller
		// takes them and Close can wake a reader.
		if err := unix.SetNonblock(fd, true); err != nil {
			unix.Munmap(mem)
			return nil, fmt.Errorf("the wake-up eventfds: %w", err)
		}
	}
	if _, err := conn.Write(message{kind: kindReady, version: version}.encode()); err != nil {
		unix.Munmap(mem)
		return nil, fmt.Errorf("sending ready: %w", err)
	}
	conn.SetDeadline(time.Time{})
	unix.Close(fds[0])
	fds = nil // newEndpoint owns the eventfds now
	return newEndpoint(name, diallerRole, conn, mem, g, efds, o, w.mac, w.offload)
}

// parseRights returns the descriptors in a control message. Whatever it
// returns the caller closes, even with an error.
func parseRights(oob []byte) ([]int, error) {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, fmt.Errorf("welcome's control message: %w", err)
	}
	var fds []int
	for _, m := range msgs {
		got, err := unix.ParseUnixRights(&m)
		if err != nil {
			return fds, fmt.Errorf("welcome's control message: %w", err)
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

// mapPeerMemory maps the listener's memfd after checking that it cannot
// shrink under the mapping and is as large as g.
func mapPeerMemory(fd int, g geometry) ([]byte, error) {
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, fmt.Errorf("the shared memory is not a sealable memfd: %w", err)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		return nil, fmt.Errorf("the shared memory is not sealed against shrinking (seals %#x)", seals)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, fmt.Errorf("the shared memory: %w", err)
	}
	if st.Size < int64(g.size()) {
		return nil, fmt.Errorf("the shared memory has %d bytes, the geometry needs %d", st.Size, g.size())
	}
	mem, err := unix.Mmap(fd, 0, g.size(), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping the shared memory: %w", err)
	}
	return mem, nil
}
