package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/services"
	"github.com/gonetstack/gonet/stats"
)

// The control endpoint. gonet up serves the status pages of its stack
// (services.HTTPHandler without a root) on a Unix socket, over the kernel's
// own stack, so that gonet ss and gonet stats can read them without any
// address on GoNet's network.

// controlDir is where gonet up puts its control socket by default, one per
// TAP device. A variable so that tests can move it.
var controlDir = "/run/gonet"

// noControl is the -control value that turns the control socket off.
const noControl = "none"

// controlTimeout bounds a status request from ss and stats.
const controlTimeout = 5 * time.Second

// defaultControlPath returns the control socket of the daemon on TAP device
// nic.
func defaultControlPath(nic string) string {
	return filepath.Join(controlDir, nic+".sock")
}

// stackStatus shows a host's stack on the status pages, with the kernel's
// counters of its TAP device.
type stackStatus struct{ h *host }

func (st stackStatus) Metrics() stats.Snapshot { return st.h.Metrics() }

func (st stackStatus) Connections() []services.ConnRow {
	infos := st.h.stack.Connections()
	rows := make([]services.ConnRow, 0, len(infos))
	for _, c := range infos {
		rows = append(rows, services.ConnRow{
			State:       c.State,
			Congestion:  c.Congestion,
			Local:       c.Local,
			Remote:      c.Remote,
			SendQueue:   c.SendQueue,
			RecvQueue:   c.RecvQueue,
			RTT:         c.RTT,
			RTO:         c.RTO,
			CWnd:        c.CWnd,
			SSThresh:    c.SSThresh,
			Retransmits: c.Retransmits,
			RecvBuffer:  c.RecvBuffer,
			Timestamps:  c.Timestamps,
			SACK:        c.SACK,
			ECN:         c.ECN,
			ECNSeen:     c.ECNSeen,
			WScale:      c.WScale,
			SndWScale:   c.SndWScale,
			RcvWScale:   c.RcvWScale,
			MSS:         c.MSS,
		})
	}
	return rows
}

// listenControl binds the control socket at path, creating its directory.
// A socket already there is taken over when no daemon answers on it (one
// killed before it could remove it); a daemon that answers, or a file that
// is not a socket, is an error.
func listenControl(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	ln, err := net.Listen("unix", path)
	if err == nil {
		return ln, nil
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if c, derr := net.DialTimeout("unix", path, time.Second); derr == nil {
		c.Close()
		return nil, fmt.Errorf("control socket %s: another gonet is serving on it", path)
	}
	if fi, serr := os.Lstat(path); serr != nil || fi.Mode().Type() != fs.ModeSocket {
		return nil, fmt.Errorf("control socket %s: in the way, and not a socket", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("control socket: removing the stale one: %w", err)
	}
	ln, err = net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	return ln, nil
}

// serveControlHandler serves h on the control socket ln until ctx is done:
// the status pages and what else a daemon answers there.
func serveControlHandler(ctx context.Context, ln net.Listener, h http.Handler) error {
	if err := services.ServeHTTP(ctx, ln, h); err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	return nil
}

// controlFlags are the flags by which ss and stats find a daemon.
type controlFlags struct {
	tap     string
	control string
}

func (c *controlFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.tap, "tap", "", "ask the daemon on TAP device `NAME` (default: the only one running)")
	fs.StringVar(&c.control, "control", "", "ask the daemon whose control socket is `PATH` (default: "+filepath.Join(controlDir, "TAP.sock")+")")
}

// check validates the flags alone.
func (c *controlFlags) check() error {
	if c.tap != "" && c.control != "" {
		return usagef("give -tap or -control, not both")
	}
	if c.tap != "" {
		return checkTapName(c.tap)
	}
	return nil
}

// socket returns the control socket the flags name: -control's, or -tap's
// default one, or with neither the only socket in controlDir.
func (c *controlFlags) socket() (string, error) {
	switch {
	case c.control != "":
		return c.control, nil
	case c.tap != "":
		return defaultControlPath(c.tap), nil
	}
	found, err := filepath.Glob(filepath.Join(controlDir, "*.sock"))
	if err != nil {
		return "", err
	}
	switch len(found) {
	case 0:
		return "", fmt.Errorf("no gonet daemon found: no control socket in %s (is gonet up running? else give -tap or -control)", controlDir)
	case 1:
		return found[0], nil
	}
	var taps []string
	for _, f := range found {
		taps = append(taps, strings.TrimSuffix(filepath.Base(f), ".sock"))
	}
	return "", fmt.Errorf("gonet daemons are running on %s: choose one with -tap", strings.Join(taps, ", "))
}

// fetchStatus asks the daemon whose control socket is path for its status.
func fetchStatus(ctx context.Context, path string) (services.Status, error) {
	var st services.Status
	body, err := askControl(ctx, path, http.MethodGet, services.StatusPrefix+"status.json", nil)
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(body, &st); err != nil {
		return st, fmt.Errorf("%s: reading the status: %w", path, err)
	}
	return st, nil
}

// askControl sends a request for target (a path) to the daemon whose
// control socket is path, and returns the answer's body; an answer other
// than 200 OK is an error saying what the daemon said.
func askControl(ctx context.Context, path, method, target string, form url.Values) ([]byte, error) {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		DisableKeepAlives: true,
	}
	defer tr.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, controlTimeout)
	defer cancel()
	// The host is a placeholder: the transport dials the socket.
	u := "http://gonet" + target
	if len(form) > 0 {
		u += "?" + form.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, describeControlError(path, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, &controlStatusError{path: path, code: resp.StatusCode, status: resp.Status, msg: strings.TrimSpace(string(msg))}
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: reading the answer: %w", path, err)
	}
	return body, nil
}

// controlStatusError is a daemon's answer other than 200 OK.
type controlStatusError struct {
	path, status, msg string
	code              int
}

func (e *controlStatusError) Error() string {
	return fmt.Sprintf("%s answered %s: %s", e.path, e.status, e.msg)
}

// describeControlError says what a failure to reach a control socket means.
func describeControlError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("no gonet daemon at %s: no such socket (is gonet up running on that TAP device?)", path)
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Errorf("no gonet daemon is serving %s: the socket is left from one that has stopped", path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%s: permission denied: run as the user that started gonet up", path)
	}
	return fmt.Errorf("asking %s: %w", path, err)
}
