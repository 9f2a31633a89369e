package tcp

// State is a connection state of RFC 9293 section 3.3.2.
type State uint8

// The eleven states. LISTEN belongs to listeners; a Conn starts in
// SYN-SENT (active open) or SYN-RECEIVED (passive open).
const (
	Closed State = iota
	Listen
	SynSent
	SynReceived
	Established
	FinWait1
	FinWait2
	CloseWait
	Closing
	LastAck
	TimeWait
)

var stateNames = [...]string{"CLOSED", "LISTEN", "SYN-SENT", "SYN-RECEIVED", "ESTABLISHED",
	"FIN-WAIT-1", "FIN-WAIT-2", "CLOSE-WAIT", "CLOSING", "LAST-ACK", "TIME-WAIT"}

func (s State) String() string { return stateNames[s] }

// synchronized reports whether the handshake has completed (RFC 9293's
// "synchronized states").
func (s State) synchronized() bool { return s >= Established }

// resetsOnAbort reports whether an ABORT call sends a reset: RFC 9293
// 3.10.4 sends one from SYN-RECEIVED, ESTABLISHED, FIN-WAIT-1, FIN-WAIT-2
// and CLOSE-WAIT, where the peer may still send or wait for data; from
// CLOSING, LAST-ACK and TIME-WAIT both sides have said all, and the TCB is
// only deleted (as Linux's tcp_need_reset).
func (s State) resetsOnAbort() bool {
	return s == SynReceived || s == Established || s == FinWait1 || s == FinWait2 || s == CloseWait
}

// canReceive reports whether data may still arrive from the peer.
func (s State) canReceive() bool { return s == Established || s == FinWait1 || s == FinWait2 }

// countsEstablished reports whether the state counts in tcpCurrEstab
// (RFC 4022: ESTABLISHED or CLOSE-WAIT).
func (s State) countsEstablished() bool { return s == Established || s == CloseWait }
