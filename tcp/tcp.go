// Package tcp is GoNet's Transmission Control Protocol (RFC 9293), with the
// options of RFC 7323 (window scaling, timestamps), loss recovery after
// RFC 6298, RFC 5681, RFC 6582 and RFC 3042, SACK (RFC 2018, RFC 2883,
// RFC 6675) and RACK-TLP (RFC 8985), ECN (RFC 3168), path MTU discovery
// (RFC 1191, RFC 5927), and initial sequence numbers and ephemeral ports
// after RFC 6528 and RFC 6056.
//
// Each connection is a process: one goroutine (Conn.run, conn.go) owns its
// Transmission Control Block, takes segments from a mailbox that the TCP
// dealer fills, and keeps one timer. The TCB is split as RFC 9293 section
// 3.3.1 splits its variables: the sender (sender.go: SND.UNA, SND.NXT,
// the window, the retransmission queue, RTT estimation, loss recovery and
// congestion control), the receiver (receiver.go: RCV.NXT, the window
// advertised, the out-of-order queue and the ACKs owed), the timers
// (timer.go) and the socket (socket.go: the application's side, with the
// send buffer and receive queue of buffers.go). The application's
// goroutines share only the socket and the state, under the connection's
// own mutex, and wake the process through a waker; no lock is shared
// between connections on the data path. The dealer (HandleIP, running in
// the network layer's dealer goroutine, IPv4's or IPv6's) parses each segment once, header and
// options, and finds its connection by its 4-tuple, or its listener for a
// SYN, or answers with a reset.
//
// Files follow RFC 9293's sections: state.go (3.3.2, the states),
// demux.go (3.10.7.1 and the dealer), listener.go (passive open,
// 3.10.7.2), conn.go and mailbox.go (the connection process and what feeds
// it; sync.go, Sync's marker through the mailbox), api.go (the socket API)
// and info.go (the connection table), input.go (3.10.7.3 and 3.10.7.4,
// segment arrival; window_span.go for a segment covering the whole
// window), output.go (3.10.4, 3.8.6: sending, Nagle and
// window management; gso.go for TSO super-segments), timer.go (3.8.1 and
// RFC 6298), timewait.go (TIME-WAIT reopened by a newer SYN, RFC 6191),
// congestion.go (the congestion control interface and NewReno), cubic.go
// (RFC 9438, the default) and hystart.go (RFC 9406, CUBIC's slow start);
// the defences against attack: paws.go (RFC 7323 sections 3.2 and 5),
// challenge.go (RFC 5961) and syncookie.go (RFC 4987 section 3.6).
//
// With SACK, loss is found and repaired by sack.go (the receiver's
// blocks), sack_sender.go (the sender's scoreboard and RFC 6675 recovery),
// prr.go (RFC 6937, its pacing), rack.go (RACK, RFC 8985 section 6) and
// tlp.go (tail loss probes, RFC 8985 section 7). Signals other than loss:
// ecn.go (RFC 3168) and icmp.go (RFC 1191 path MTU, RFC 1122 4.2.3.9 soft
// errors). Bounds: memory.go (the stack's memory budget), timeouts.go (user
// timeout, RFC 5482; orphans) and autotune.go (receive-window auto-tuning).
package tcp

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"net/netip"
	"sync"
	"time"

	"github.com/gonetstack/gonet/env"
	"github.com/gonetstack/gonet/ip"
	"github.com/gonetstack/gonet/seqnum"
	"github.com/gonetstack/gonet/stats"
	"github.com/gonetstack/gonet/wire"
)

// Config tunes TCP. Zero fields take the defaults, which follow Linux.
type Config struct {
	// MSL is the maximum segment lifetime; TIME_WAIT lasts 2*MSL (30 s,
	// so 60 s as Linux's TCP_TIMEWAIT_LEN). Tests make it short.
	MSL time.Duration
	// RTOMin, RTOMax and RTOInitial bound the retransmission timeout
	// (RFC 6298: 1 s initial; Linux: 200 ms minimum, 120 s maximum).
	RTOMin, RTOMax, RTOInitial time.Duration
	// SendBuffer and ReceiveBuffer size each connection's buffers (4 MiB:
	// a bulk transfer on a fast link; 128 KiB to receive, as Linux's
	// tcp_rmem[1], which auto-tuning grows, autotune.go). Memory is taken
	// from the stack's budget as data fills them, not when the connection
	// opens.
	SendBuffer, ReceiveBuffer int
	// ReceiveBufferMax bounds receive auto-tuning (6 MiB, as Linux's
	// tcp_rmem[2]); the window scale is chosen for it. One not above
	// ReceiveBuffer turns auto-tuning off.
	ReceiveBufferMax int
	// DelayedAck is the longest an ACK waits for company (40 ms, as
	// Linux's minimum; RFC 9293 3.8.6.3 allows up to 500 ms).
	DelayedAck time.Duration
	// QuickAcks bounds the data segments acknowledged at once, not
	// delayed, at a connection's start and after a pause (quickack.go;
	// 16, as Linux's TCP_MAX_QUICKACKS; negative: none).
	QuickAcks int
	// SynRetries and SynAckRetries bound handshake retransmissions (6 and
	// 5, as Linux); Retries bounds retransmissions of data before the
	// connection is aborted with ETIMEDOUT (15, as tcp_retries2).
	SynRetries, SynAckRetries, Retries int
	// FinTimeout bounds FIN_WAIT_2 for a connection the application has
	// closed (60 s, as tcp_fin_timeout).
	FinTimeout time.Duration
	// UserTimeout is how long data may stay unacknowledged before the
	// connection is aborted with ETIMEDOUT (RFC 5482, timeouts.go; 0:
	// no bound but Retries, as Linux's TCP_USER_TIMEOUT). Conn.
	// SetUserTimeout overrides it per connection.
	UserTimeout time.Duration
	// OrphanRetries bounds the retransmissions, and the zero-window
	// probes answered or not, of a connection the application has closed
	// (8, as Linux's tcp_orphan_retries of 0 means).
	OrphanRetries int
	// Keepalive defaults: idle time before the first probe, interval, and
	// probes before giving up (2 h, 75 s, 9: RFC 1122 4.2.3.6, Linux).
	KeepaliveIdle, KeepaliveInterval time.Duration
	KeepaliveCount                   int
	// Backlog is the listen backlog when Listen is given none (4096, as
	// Linux's somaxconn, which Go's net.Listen uses).
	Backlog int
	// SynCookies says when a listener answers a SYN with a SYN cookie
	// (RFC 4987 section 3.6, syncookie.go) instead of a half-open
	// connection: when its backlog is full (the default, as Linux's
	// tcp_syncookies=1), always, or never (the SYN is dropped).
	SynCookies SynCookieMode
	// ChallengeACKLimit bounds the challenge ACKs (RFC 5961 section 7)
	// the stack sends per second over all its connections (1000, as
	// Linux's tcp_challenge_ack_limit before 6.0; negative: no limit).
	// ChallengeACKInterval is the least time between two on one
	// connection (500 ms, as Linux's tcp_invalid_ratelimit; negative:
	// none).
	ChallengeACKLimit    int
	ChallengeACKInterval time.Duration
	// EphemeralLow and EphemeralHigh bound the local ports of active opens
	// (32768-60999).
	EphemeralLow, EphemeralHigh uint16
	// ECN says when connections use Explicit Congestion Notification
	// (RFC 3168, ecn.go): answering a peer that asks (the default, as
	// Linux's tcp_ecn=2), asking too, or never.
	ECN ECNMode
	// Congestion names the default congestion control: "cubic" (RFC
	// 9438 with HyStart++, RFC 9406; the default, as Linux's) or
	// "newreno" (RFC 5681, RFC 6582). Conn.SetCongestion overrides it
	// per connection.
	Congestion string
	// DisableSACK stops the stack offering and accepting SACK-permitted
	// (RFC 2018), as Linux's tcp_sack=0: no SACK blocks sent, none
	// taken, and loss recovery falls back to NewReno (RFC 6582).
	// DisableRACK turns off RACK-TLP (RFC 8985), as Linux's
	// tcp_recovery=0 with tcp_early_retrans=0: SACK recovery then
	// detects loss by RFC 6675's DupThresh rule alone, and a tail loss
	// waits for the retransmission timer. Both are on by default.
	DisableSACK, DisableRACK bool
	// ForwardMaxPending bounds the SYNs waiting for the forwarder hook's
	// decision (forward.go), each with its goroutine; beyond it SYNs are
	// dropped, as a full backlog drops them (1024).
	ForwardMaxPending int
}

func (c *Config) setDefaults() {
	c.MSL = cmp.Or(c.MSL, 30*time.Second)
	c.RTOMin = cmp.Or(c.RTOMin, 200*time.Millisecond)
	c.RTOMax = cmp.Or(c.RTOMax, 120*time.Second)
	c.RTOInitial = cmp.Or(c.RTOInitial, time.Second)
	c.DelayedAck = cmp.Or(c.DelayedAck, 40*time.Millisecond)
	c.QuickAcks = cmp.Or(c.QuickAcks, 16)
	c.FinTimeout = cmp.Or(c.FinTimeout, 60*time.Second)
	c.KeepaliveIdle = cmp.Or(c.KeepaliveIdle, 2*time.Hour)
	c.KeepaliveInterval = cmp.Or(c.KeepaliveInterval, 75*time.Second)
	c.SendBuffer = cmp.Or(c.SendBuffer, 4<<20)
	c.ReceiveBuffer = cmp.Or(c.ReceiveBuffer, 128<<10)
	c.ReceiveBufferMax = cmp.Or(c.ReceiveBufferMax, 6<<20)
	c.SynRetries = cmp.Or(c.SynRetries, 6)
	c.SynAckRetries = cmp.Or(c.SynAckRetries, 5)
	c.Retries = cmp.Or(c.Retries, 15)
	c.OrphanRetries = cmp.Or(c.OrphanRetries, 8)
	c.KeepaliveCount = cmp.Or(c.KeepaliveCount, 9)
	c.Backlog = cmp.Or(c.Backlog, 4096)
	c.ChallengeACKLimit = cmp.Or(c.ChallengeACKLimit, 1000)
	c.ChallengeACKInterval = cmp.Or(c.ChallengeACKInterval, 500*time.Millisecond)
	if c.EphemeralLow == 0 {
		c.EphemeralLow, c.EphemeralHigh = 32768, 60999
	}
	c.Congestion = cmp.Or(c.Congestion, "cubic")
	c.ForwardMaxPending = cmp.Or(c.ForwardMaxPending, 1024)
}

// Stats are TCP's counters, named after the kernel's Tcp MIB (RFC 4022)
// and TcpExt where one exists.
type Stats struct {
	ActiveOpens     stats.Counter
	PassiveOpens    stats.Counter
	AttemptFails    stats.Counter
	EstabResets     stats.Counter
	CurrEstab       stats.Gauge
	InSegs          stats.Counter
	OutSegs         stats.Counter
	RetransSegs     stats.Counter
	InErrs          stats.Counter // malformed header or options
	InCsumErrors    stats.Counter
	OutRsts         stats.Counter
	InRsts          stats.Counter
	ListenOverflows stats.Counter // SYN dropped: backlog full
	ListenDrops     stats.Counter // SYN dropped for any reason
	FastRetrans     stats.Counter
	Timeouts        stats.Counter // retransmission timer expiries
	DelayedACKs     stats.Counter // ACKs sent by the delayed-ACK timer
	PersistProbes   stats.Counter // zero-window probes
	KeepaliveProbes stats.Counter
	KeepaliveAborts stats.Counter
	TimeoutAborts   stats.Counter // retransmissions exhausted
	OFOQueue        stats.Counter // segments queued out of order
	PartialAcks     stats.Counter // NewReno partial acknowledgements
	DupAcks         stats.Counter
	ChallengeACKs   stats.Counter
	OutOfWindow     stats.Counter // segments failing the acceptability test
	InQueueDrops    stats.Counter // connection's input queue full
	RcvBufDrops     stats.Counter // data beyond the receive buffer or budget
	DataAfterClose  stats.Counter // data for a closed application: answered by RST
	TimeWaits       stats.Counter
	Connections     stats.Gauge // connections with a goroutine, any state

	// RFC 5961 and RFC 7323 section 5: challenge ACKs not sent for the
	// rate limits (ChallengeACKs counts those sent), ACKs outside
	// SND.UNA-MAX.SND.WND..SND.NXT dropped, segments dropped by PAWS.
	ChallengeACKsLimited stats.Counter
	BadACKs              stats.Counter
	PAWSEstab            stats.Counter
	TSOptMissing         stats.Counter // RFC 7323 3.2: no timestamp once negotiated, dropped
	TWReopened           stats.Counter // TIME-WAIT ended by a newer SYN (RFC 6191, timewait.go)
	// SYN cookies (RFC 4987 3.6): SYN-ACKs sent with a cookie, ACKs whose
	// cookie made a connection, and ACKs to a listener that had sent
	// cookies whose cookie was wrong or expired (answered by a reset).
	SynCookiesSent      stats.Counter
	SynCookiesValidated stats.Counter
	SynCookiesFailed    stats.Counter

	// HyStart++ (RFC 9406): slow start left for CSS on an RTT increase,
	// CSS found spurious (back to slow start), and CSS run to its end
	// (congestion avoidance before any loss).
	HyStartDelayDetect stats.Counter
	HyStartSpurious    stats.Counter
	HyStartCSSExits    stats.Counter

	// ICMP errors (icmp.go): quoting no connection, quoting a sequence
	// number outside SND.UNA..SND.MAX (RFC 5927 4.1; Linux's
	// OutOfWindowIcmps), soft errors recorded and hard ones that aborted
	// a connection attempt (RFC 1122 4.2.3.9). Path MTU discovery (RFC
	// 1191 6.4): "fragmentation needed" without DF in the quote ignored,
	// MSS reductions, and reductions that resent the data in flight.
	ICMPNoConn       stats.Counter
	OutOfWindowIcmps stats.Counter
	ICMPSoftErrors   stats.Counter
	ICMPHardErrors   stats.Counter
	PMTUIgnored      stats.Counter
	PMTUReductions   stats.Counter
	PMTURetransmits  stats.Counter

	// ECN (RFC 3168, ecn.go): connections that negotiated it, segments
	// that arrived marked CE, ACKs with ECE, window reductions they
	// caused (at most one per window), and CWRs sent.
	ECNNegotiated   stats.Counter
	ECNCEReceived   stats.Counter
	ECNEchoReceived stats.Counter
	ECNReductions   stats.Counter
	ECNCWRSent      stats.Counter
	ECNLossNoReduce stats.Counter // a loss in a window an ECE had reduced: no second reduction
	// SACK loss recovery (RFC 2018, RFC 2883, RFC 6675; sack_sender.go):
	// recoveries entered, holes retransmitted from the scoreboard, D-SACK
	// blocks received, and SACK blocks discarded as invalid (outside
	// SND.UNA..SND.MAX), as TcpExt's TCPSackRecovery, TCPDSACKRecv and
	// TCPSACKDiscard.
	SACKRecovery stats.Counter
	SACKRetrans  stats.Counter
	DSACKRecv    stats.Counter
	SACKDiscard  stats.Counter
	// RACK-TLP (RFC 8985; rack.go, tlp.go): segments RACK marked lost,
	// reordering timer expiries, tail loss probes sent (TcpExt
	// TCPLossProbes), and probes that repaired a loss (TCPLossProbeRecovery).
	RACKLoss            stats.Counter
	RACKReorderTimeouts stats.Counter
	LossProbes          stats.Counter
	LossProbeRecovery   stats.Counter
	// Retransmissions that repaired nothing (spurious.go): segments the
	// peer's D-SACK blocks reported received twice (TcpExt's
	// TCPDSACKRecvSegs; on a path that does not duplicate, each a
	// needless retransmission, RFC 3708 section 3), retransmission
	// timeouts the original's ACK then showed needless (TCPSpuriousRTOs,
	// found by the timestamp it echoes, RFC 3522), and loss probes that
	// repaired nothing, both copies delivered (GoNet's own: Linux counts
	// none). The receiver's side: D-SACK blocks sent for a duplicate below
	// RCV.NXT and for one of data held out of order (TCPDSACKOldSent,
	// TCPDSACKOfoSent).
	DSACKRecvSegs     stats.Counter
	SpuriousRTOs      stats.Counter
	LossProbeSpurious stats.Counter
	DSACKOldSent      stats.Counter
	DSACKOfoSent      stats.Counter
	// Memory bounds (memory.go): connections not made because the memory
	// budget could not back them (SYN or cookie ACK dropped, Dial failed
	// with ENOBUFS), and episodes of a receive window held back by the
	// budget (TCPMemoryPressures).
	MemoryRefusals  stats.Counter
	MemoryPressures stats.Counter
	// Time bounds (timeouts.go): connections aborted by the user timeout
	// (RFC 5482), and orphans aborted after OrphanRetries retransmissions
	// or zero-window probes.
	UserTimeoutAborts stats.Counter
	OrphanAborts      stats.Counter
	// Receive buffers grown by auto-tuning (autotune.go).
	RcvBufAutoGrows stats.Counter
	// The forwarder (forward.go): SYNs handed to the hook, and its
	// decisions; accepted connections whose handshake then failed;
	// retransmitted SYNs of a pending request and SYNs beyond
	// ForwardMaxPending, dropped; requests pending now.
	ForwardRequests      stats.Counter
	ForwardAccepted      stats.Counter
	ForwardRefused       stats.Counter
	ForwardUnreachable   stats.Counter
	ForwardDropped       stats.Counter
	ForwardAcceptFails   stats.Counter
	ForwardSYNDuplicates stats.Counter
	ForwardPendingDrops  stats.Counter
	ForwardPending       stats.Gauge
}

// Protocol is TCP on one stack.
type Protocol struct {
	cfg  Config
	env  *env.Env
	nets ip.Networks // the network layers it sends through, by family

	secret [32]byte // RFC 6528's secret key
	start  time.Time

	challenges challengeBudget // the stack's challenge ACKs (challenge.go)
	fwd        forwarder       // the forwarder hook and its pending requests (forward.go)

	// sackScratch is the dealer's, where a segment's SACK blocks parse
	// before they are copied into it (segment.parseOptions).
	sackScratch [wire.TCPMaxSACKBlocks]wire.SACKBlock

	mu        sync.RWMutex
	conns     map[fourTuple]*Conn
	listeners map[uint16][]*Listener
	closed    bool
	wg        sync.WaitGroup // every connection's goroutine
	// unread holds ended connections whose received data the application
	// has not read yet: their buffers are released by Close, or by the
	// stack's shutdown.
	unread map[*Conn]struct{}

	logger logger // log.go

	Stats Stats
}

// fourTuple identifies a connection, local side first.
type fourTuple struct {
	local, remote netip.AddrPort
}

// route finds the network layer of dst's family and its route to dst.
func (p *Protocol) route(dst netip.Addr) (ip.Network, ip.Route, error) {
	nw, err := p.nets.For(dst)
	if err != nil {
		return nil, ip.Route{}, err
	}
	r, err := nw.Route(dst)
	return nw, r, err
}

// New returns TCP over nets, registered with each as its protocol 6.
func New(nets ip.Networks, cfg Config, e *env.Env) *Protocol {
	cfg.setDefaults()
	p := &Protocol{
		cfg:       cfg,
		env:       e,
		nets:      nets,
		start:     e.Clock.Now(),
		conns:     map[fourTuple]*Conn{},
		listeners: map[uint16][]*Listener{},
		unread:    map[*Conn]struct{}{},
	}
	p.logger = newLogger(p)
	for i := 0; i < len(p.secret); i += 8 {
		binary.LittleEndian.PutUint64(p.secret[i:], e.Rand.Uint64())
	}
	nets.Each(func(n ip.Network) { n.Register(wire.ProtoTCP, p) })
	return p
}

// Config returns the configuration in force.
func (p *Protocol) Config() Config { return p.cfg }

// isn chooses an initial sequence number as RFC 6528 section 3 does:
// ISN = M + F(localip, localport, remoteip, remoteport, secretkey), with M a
// timer ticking every 4 microseconds and F a keyed cryptographic hash, so
// that sequence numbers are neither predictable nor reused by an
// incarnation of the same 4-tuple too soon.
func (p *Protocol) isn(id fourTuple) seqnum.Value {
	var buf [32 + 36]byte
	copy(buf[:32], p.secret[:])
	b := appendTuple(buf[:32], id)
	sum := sha256.Sum256(b)
	m := uint32(p.env.Clock.Now().Sub(p.start) / (4 * time.Microsecond))
	return seqnum.Value(m + binary.BigEndian.Uint32(sum[:4]))
}

// tsNow is the timestamp clock of RFC 7323 section 5.4: milliseconds.
func (p *Protocol) tsNow() uint32 { return p.tsAt(p.env.Clock.Now()) }

// tsAt is the timestamp clock's reading at t.
func (p *Protocol) tsAt(t time.Time) uint32 { return uint32(t.Sub(p.start) / time.Millisecond) }

// tsVal is the connection's timestamp clock now, as its peer sees it
// (offset per connection, RFC 7323 section 5.4).
func (c *Conn) tsVal() uint32 { return c.p.tsAt(c.now()) + c.tsOffset }

// Close aborts every connection and listener and waits for their
// goroutines; the stack calls it on shutdown.
func (p *Protocol) Close() {
	p.mu.Lock()
	p.closed = true
	conns := make([]*Conn, 0, len(p.conns))
	for _, c := range p.conns {
		conns = append(conns, c)
	}
	var ls []*Listener
	for _, l := range p.listeners {
		ls = append(ls, l...)
	}
	p.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	for _, c := range conns {
		c.abort(errStackClosed)
	}
	p.wg.Wait()
	p.mu.Lock()
	unread := p.unread
	p.unread = map[*Conn]struct{}{}
	p.mu.Unlock()
	for c := range unread {
		c.mu.Lock()
		p.env.Budget.Release(c.sock.rcvBuf.clear())
		c.mu.Unlock()
	}
}

// keepUnread remembers an ended connection with data left to read.
func (p *Protocol) keepUnread(c *Conn) {
	p.mu.Lock()
	p.unread[c] = struct{}{}
	p.mu.Unlock()
}

// forgetUnread is told that the application closed c.
func (p *Protocol) forgetUnread(c *Conn) {
	p.mu.Lock()
	delete(p.unread, c)
	p.mu.Unlock()
}
