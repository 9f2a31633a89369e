package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stack"
)

// serviceGroup is a set of services running on a stack, each on its own
// goroutine, until Stop.
type serviceGroup struct {
	ctx    context.Context // cancelled by Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu   sync.Mutex
	errs []error // of the services that stopped on their own
	// failed is closed when the first service stops on its own.
	failed   chan struct{}
	failOnce sync.Once
}

func newServiceGroup(ctx context.Context) *serviceGroup {
	ctx, cancel := context.WithCancel(ctx)
	return &serviceGroup{ctx: ctx, cancel: cancel, failed: make(chan struct{})}
}

// run runs serve on a goroutine of its own until Stop. serve must return
// when its context is done; an error it returns before that is a failure,
// which Failed announces and Stop returns.
func (g *serviceGroup) run(serve func(ctx context.Context) error) {
	g.wg.Go(func() {
		if err := serve(g.ctx); err != nil {
			g.mu.Lock()
			g.errs = append(g.errs, err)
			g.mu.Unlock()
			g.failOnce.Do(func() { close(g.failed) })
		}
	})
}

// startUDP binds each service with a UDP form to its well-known port on
// every address of s, of both families, and runs it until Stop. Services without one (http)
// are skipped. On error the services already started go on running: the
// caller stops them.
func (g *serviceGroup) startUDP(s *stack.Stack, list []services.Service) error {
	for _, svc := range list {
		if svc.ServeUDP == nil {
			continue
		}
		// ":port" with "udp" is both families' wildcard when the
		// stack runs IPv6, IPv4's when not, as Go's net.
		laddr := ":" + strconv.Itoa(int(svc.Port))
		conn, err := s.ListenPacket("udp", laddr)
		if err != nil {
			return fmt.Errorf("%s: binding UDP %v: %w", svc.Name, laddr, err)
		}
		g.run(func(ctx context.Context) error {
			// The service closes conn when ctx is done; this close is
			// for when it stops on an error of its own.
			defer conn.Close()
			return svc.ServeUDP(ctx, conn)
		})
	}
	return nil
}

// startTCP listens on each service's well-known TCP port on every address
// of s, of both families, and runs the service there until Stop. Services without a TCP form
// are skipped. On error the services already started go on running: the
// caller stops them.
func (g *serviceGroup) startTCP(s *stack.Stack, list []services.Service) error {
	for _, svc := range list {
		if svc.ServeBoth != nil {
			if err := g.startBoth(s, svc); err != nil {
				return err
			}
			continue
		}
		if svc.ServeTCP == nil {
			continue
		}
		laddr := ":" + strconv.Itoa(int(svc.Port))
		ln, err := s.Listen("tcp", laddr)
		if err != nil {
			return fmt.Errorf("%s: listening on TCP %v: %w", svc.Name, laddr, err)
		}
		g.run(func(ctx context.Context) error {
			defer ln.Close()
			return svc.ServeTCP(ctx, ln)
		})
	}
	return nil
}

// startBoth listens on a service's well-known port for TCP and binds it
// for UDP, on every address of s, and runs the service on both until
// Stop (iperf3's, whose UDP streams are set up over TCP).
func (g *serviceGroup) startBoth(s *stack.Stack, svc services.Service) error {
	laddr := ":" + strconv.Itoa(int(svc.Port))
	ln, err := s.Listen("tcp", laddr)
	if err != nil {
		return fmt.Errorf("%s: listening on TCP %v: %w", svc.Name, laddr, err)
	}
	conn, err := s.ListenPacket("udp", laddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("%s: binding UDP %v: %w", svc.Name, laddr, err)
	}
	g.run(func(ctx context.Context) error {
		defer ln.Close()
		defer conn.Close()
		return svc.ServeBoth(ctx, ln, conn)
	})
	return nil
}

// startUDPServices runs each service of list that has a UDP form on s's
// UDP, as startUDP does. On error nothing is left running.
func startUDPServices(ctx context.Context, s *stack.Stack, list []services.Service) (*serviceGroup, error) {
	g := newServiceGroup(ctx)
	if err := g.startUDP(s, list); err != nil {
		return nil, errors.Join(err, g.Stop())
	}
	return g, nil
}

// Failed is closed when a service has stopped on its own; Stop returns its
// error.
func (g *serviceGroup) Failed() <-chan struct{} { return g.failed }

// Stop stops the services, waits for them, and returns the errors of those
// that had stopped on their own.
func (g *serviceGroup) Stop() error {
	g.cancel()
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return errors.Join(g.errs...)
}
