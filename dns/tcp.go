package dns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	mdns "github.com/miekg/dns"
)

// DNS over TCP (RFC 1035 4.2.2, RFC 7766): each message carries a two-byte
// length in front; a client may send several queries on one connection
// without waiting (pipelining, RFC 7766 6.2.1.1), and the answers may come
// back in any order, since each carries its query's ID.

// ServeTCP accepts connections on l until ctx ends (it then closes l and
// every connection, waits for them and returns nil) or accepting fails.
// Each connection is served by a goroutine of its own.
func (f *Forwarder) ServeTCP(ctx context.Context, l net.Listener) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { l.Close() })
	defer stop()
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("dns: serve TCP on %v: %w", l.Addr(), err)
		}
		select {
		case f.tcpConns <- struct{}{}:
		default:
			f.Stats.TCPRefused.Inc()
			c.Close()
			continue
		}
		f.Stats.TCPConns.Add(1)
		wg.Go(func() {
			defer func() {
				f.Stats.TCPConns.Add(-1)
				<-f.tcpConns
			}()
			f.serveConn(ctx, c)
		})
	}
}

// tcpConn is one guest connection: its reader is serveConn's loop, and
// the goroutines answering its queries share the writer.
type tcpConn struct {
	c       net.Conn
	timeout time.Duration
	wmu     sync.Mutex // one answer written at a time
}

// write sends one answer with its length; a guest that does not read it
// in time loses the connection rather than hold a goroutine.
func (tc *tcpConn) write(msg []byte) error {
	framed := make([]byte, 2+len(msg))
	binary.BigEndian.PutUint16(framed, uint16(len(msg)))
	copy(framed[2:], msg)
	tc.wmu.Lock()
	defer tc.wmu.Unlock()
	tc.c.SetWriteDeadline(time.Now().Add(tc.timeout))
	_, err := tc.c.Write(framed)
	if err != nil {
		tc.c.Close()
	}
	return err
}

// serveConn reads queries from c until the guest closes it, it idles past
// Config.TCPIdle with nothing in flight (RFC 7766 6.2.3), it sends
// something that is not a query (RFC 7766 section 8 leaves the server free
// to close then; it answers FORMERR first when it can), or ctx ends. Each
// query is answered by a goroutine of its own, at most
// Config.MaxPipelined at once: beyond that the connection is not read until
// one is answered, so a guest that pipelines without end meets TCP's
// backpressure, not an unbounded queue.
func (f *Forwarder) serveConn(ctx context.Context, c net.Conn) {
	tc := &tcpConn{c: c, timeout: f.cfg.Timeout}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	// A token per query of this connection in flight, and one for the
	// query being read.
	pipelined := make(chan struct{}, f.cfg.MaxPipelined+1)
	var wg sync.WaitGroup
	defer func() {
		// Answer what was asked before closing.
		wg.Wait()
		c.Close()
	}()
	for {
		select {
		case pipelined <- struct{}{}:
		case <-ctx.Done():
			return
		}
		raw, err := f.readQuery(c, func() bool { return len(pipelined) > 1 })
		if err != nil {
			return
		}
		q, err := parseQuery(raw)
		if err != nil {
			f.Stats.Malformed.Inc()
			if reply := errorReply(raw, mdns.RcodeFormatError); reply != nil {
				tc.write(reply)
			}
			return
		}
		f.Stats.Queries.Inc()
		if !f.admit() {
			<-pipelined
			if reply := errorReply(raw, mdns.RcodeRefused); reply != nil {
				tc.write(reply)
			}
			continue
		}
		wg.Go(func() {
			defer func() {
				f.done()
				<-pipelined
			}()
			_, answer := f.forward(ctx, q, true)
			tc.write(answer)
		})
	}
}

// readQuery reads one message from c. The wait for its first byte is
// bounded by Config.TCPIdle, and renewed as long as busy reports queries
// in flight; the rest of the message must follow within Config.Timeout.
func (f *Forwarder) readQuery(c net.Conn, busy func() bool) ([]byte, error) {
	var l [2]byte
	for {
		c.SetReadDeadline(time.Now().Add(f.cfg.TCPIdle))
		n, err := io.ReadFull(c, l[:1])
		if err == nil {
			break
		}
		if n == 0 && errors.Is(err, os.ErrDeadlineExceeded) && busy() {
			continue
		}
		return nil, err
	}
	c.SetReadDeadline(time.Now().Add(f.cfg.Timeout))
	if _, err := io.ReadFull(c, l[1:]); err != nil {
		return nil, err
	}
	msg := make([]byte, binary.BigEndian.Uint16(l[:]))
	if _, err := io.ReadFull(c, msg); err != nil {
		return nil, err
	}
	return msg, nil
}
