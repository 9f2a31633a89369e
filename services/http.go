package services

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gonetstack/gonet/metrics"
	"github.com/gonetstack/gonet/stats"
)

// StatusPrefix is where the status pages live on every HTTPHandler, a file
// root or not: StatusPrefix itself (HTML for browsers, text for the rest),
// StatusPrefix+"status.json", StatusPrefix+"status.txt",
// StatusPrefix+"ss" (the connection table as ss -tan prints it) and
// StatusPrefix+"metrics" (every counter and gauge in Prometheus' text
// exposition format, package metrics).
const StatusPrefix = "/.gonet/"

// The HTTP server's limits. A client gets ReadHeaderTimeout to send its
// request's header and IdleTimeout between requests on a kept-alive
// connection; each connection has its own goroutine, so a slow client costs
// only its own. There is no write timeout: a large file on a slow link may
// rightly take long.
const (
	httpReadHeaderTimeout = 10 * time.Second
	httpIdleTimeout       = 60 * time.Second
	httpMaxHeaderBytes    = 64 << 10
)

// httpShutdownGrace is how long ServeHTTP lets requests in flight finish
// once its context is done, before it closes their connections. A variable
// so that tests can shorten it.
var httpShutdownGrace = 5 * time.Second

// HTTPHandler returns GoNet's web server (RFC 9110). With root non-empty it
// serves the files under the directory root as net/http's file server does
// (ranges, conditional requests, HEAD, directory listings, index.html), to
// GET and HEAD only; paths are resolved inside root with os.Root, so
// neither ".." nor a symbolic link can lead out of it, and such a path is
// answered 404 as a missing file is. Without root it serves the status
// pages of status at "/", "/status.json", "/status.txt", "/ss" and
// "/metrics".
//
// Either way the status pages are also under StatusPrefix ("/.gonet/"),
// which the file root never reaches: a directory named .gonet in the root
// is not served. A nil status shows empty pages.
func HTTPHandler(root string, status StatusSource) http.Handler {
	mux := http.NewServeMux()
	mux.Handle(StatusPrefix, statusPages{src: status, prefix: StatusPrefix})
	if root == "" {
		mux.Handle("/", statusPages{src: status, prefix: "/"})
	} else {
		mux.Handle("/", fileServer{dir: root})
	}
	return mux
}

// fileServer serves the files under dir.
type fileServer struct{ dir string }

func (s fileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !getOrHead(w, r) {
		return
	}
	// The root is opened for each request, so that the server follows
	// the directory if it is replaced (a new release of a site), and so
	// that the handler owns no descriptor it would have to be closed for.
	root, err := os.OpenRoot(s.dir)
	if err != nil {
		http.Error(w, "503 service unavailable: the web root cannot be opened", http.StatusServiceUnavailable)
		return
	}
	defer root.Close()
	http.FileServerFS(rootFS{root.FS()}).ServeHTTP(w, r)
}

// rootFS is an os.Root's file system with the errors of paths that lead
// nowhere turned into fs.ErrNotExist, so that net/http answers 404 for them
// rather than 500: a path out of the root (os.Root's "path escapes from
// parent", which has no exported value to test for), a file used as a
// directory, a symbolic link loop, a name too long.
type rootFS struct{ fsys fs.FS }

func (r rootFS) Open(name string) (fs.File, error) {
	f, err := r.fsys.Open(name)
	if err != nil {
		return nil, notFound(err)
	}
	return f, nil
}

func notFound(err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return err
	}
	var pe *fs.PathError
	if !errors.As(err, &pe) {
		return err
	}
	switch {
	case errors.Is(pe.Err, syscall.ENOTDIR), errors.Is(pe.Err, syscall.ELOOP),
		errors.Is(pe.Err, syscall.ENAMETOOLONG), strings.Contains(pe.Err.Error(), "escapes"):
		return &fs.PathError{Op: pe.Op, Path: pe.Path, Err: fs.ErrNotExist}
	}
	return err
}

// getOrHead answers 405 to a request whose method is neither GET nor HEAD,
// and reports whether the request may go on.
func getOrHead(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
	return false
}

// statusPages serves src's status under prefix.
type statusPages struct {
	src    StatusSource
	prefix string
}

func (p statusPages) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	page, ok := strings.CutPrefix(r.URL.Path, p.prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	switch page {
	case "", "status.json", "status.txt", "ss":
	case "metrics":
		metrics.Handler(func() stats.Snapshot { return metricsOf(p.src) }).ServeHTTP(w, r)
		return
	default:
		http.NotFound(w, r)
		return
	}
	if !getOrHead(w, r) {
		return
	}
	st := Snapshot(p.src)
	h := w.Header()
	// The figures change all the time: a cached copy is a wrong one.
	h.Set("Cache-Control", "no-store")
	switch page {
	case "status.json":
		h.Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.Encode(st)
	case "status.txt":
		h.Set("Content-Type", "text/plain; charset=utf-8")
		writeStatusText(w, st)
	case "ss":
		h.Set("Content-Type", "text/plain; charset=utf-8")
		WriteConnTable(w, st.Connections)
	default:
		// A browser asks for HTML; curl and the like get text.
		h.Set("Vary", "Accept")
		if !strings.Contains(r.Header.Get("Accept"), "text/html") {
			h.Set("Content-Type", "text/plain; charset=utf-8")
			writeStatusText(w, st)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		statusTemplate().Execute(w, statusView{Status: st, Prefix: StatusPrefix})
	}
}

// writeStatusText writes the status as text: the connection table, a blank
// line, and the non-zero counters.
func writeStatusText(w http.ResponseWriter, st Status) {
	WriteConnTable(w, st.Connections)
	fmt.Fprintln(w)
	stats.Write(w, st.Counters, false)
}

// statusView is what the HTML status page is rendered from.
type statusView struct {
	Status
	Prefix string
}

// Header returns the connection table's column names.
func (v statusView) Header() []string { return connHeader }

// Rows returns the connection table's cells, as the text forms show them.
func (v statusView) Rows() [][]string {
	var out [][]string
	for _, r := range v.Connections {
		out = append(out, connCells(r))
	}
	return out
}

// CounterNames returns the names of the non-zero counters, sorted.
func (v statusView) CounterNames() []string {
	var names []string
	for n, x := range v.Counters {
		if x != 0 {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	return names
}

var statusTemplate = sync.OnceValue(func() *template.Template {
	return template.Must(template.New("status").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>GoNet status</title>
<style>
body { font-family: sans-serif; margin: 2em; }
table { border-collapse: collapse; margin-bottom: 2em; }
th, td { padding: 0.2em 0.8em; text-align: left; font-family: monospace; }
th { border-bottom: 1px solid #888; }
td.n { text-align: right; }
</style>
</head>
<body>
<h1>GoNet status</h1>
<p>Also as <a href="{{.Prefix}}status.json">JSON</a>, <a href="{{.Prefix}}status.txt">text</a>, <a href="{{.Prefix}}metrics">Prometheus metrics</a>
and <a href="{{.Prefix}}ss">ss</a>.</p>
<h2>Connections</h2>
<table>
<tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range .Rows}}<tr>{{range .}}<td>{{.}}</td>{{end}}</tr>
{{else}}<tr><td colspan="{{len .Header}}">no connections</td></tr>
{{end}}</table>
<h2>Counters</h2>
<table>
<tr><th>Counter</th><th>Value</th></tr>
{{range $name := .CounterNames}}<tr><td>{{$name}}</td><td class="n">{{index $.Counters $name}}</td></tr>
{{else}}<tr><td colspan="2">no counter has moved</td></tr>
{{end}}</table>
</body>
</html>
`))
})

// ServeHTTP serves h over HTTP/1.1 on ln, each connection on its own
// goroutine, with time limits that keep slow or idle clients from holding
// connections for ever. When ctx is done it stops accepting, lets requests
// in flight finish for a grace period of a few seconds, closes what is
// left, waits for every connection's goroutine, and returns nil. It returns
// an error when ln fails or is closed by someone else, after closing the
// connections and waiting for them likewise.
func ServeHTTP(ctx context.Context, ln net.Listener, h http.Handler) error {
	// Every connection goroutine ends with StateClosed (or
	// StateHijacked), after StateNew announced it from Serve's own
	// goroutine: counting them is how ServeHTTP waits for them, which
	// http.Server.Close alone does not.
	var conns sync.WaitGroup
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: httpReadHeaderTimeout,
		IdleTimeout:       httpIdleTimeout,
		MaxHeaderBytes:    httpMaxHeaderBytes,
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				conns.Add(1)
			case http.StateClosed, http.StateHijacked:
				conns.Done()
			}
		},
	}
	addr := ln.Addr()
	shutDown := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		defer close(shutDown)
		sctx, cancel := context.WithTimeout(context.Background(), httpShutdownGrace)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			srv.Close()
		}
	})
	err := srv.Serve(ln)
	if stop() {
		// ctx is not done: the listener failed.
		srv.Close()
		conns.Wait()
		return fmt.Errorf("services: http on %v: %w", addr, err)
	}
	<-shutDown
	conns.Wait()
	return nil
}

// serveHTTPDefault runs the web server with no file root and no status
// source: the form the registry's http entry runs. The daemon gives the
// server its stack's status, and -http-root, through HTTPHandler and
// ServeHTTP.
func serveHTTPDefault(ctx context.Context, ln net.Listener) error {
	return ServeHTTP(ctx, ln, HTTPHandler("", nil))
}
