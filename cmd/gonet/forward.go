package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/gonetstack/gonet/gateway"
	"github.com/gonetstack/gonet/services"
)

// gonet forward: a running gateway's inbound port forwards, added, listed
// and removed at run time through its control socket, where the daemon
// answers at forwardsPath: GET lists them, one a line; POST adds spec=;
// DELETE removes spec=.

const forwardsPath = services.StatusPrefix + "forwards"

var forwardCommand = &command{
	name:    "forward",
	summary: "add, list or remove a running gonet gateway's inbound port forwards",
	usage:   "gonet forward [-tap NAME | -control PATH] {add PROTO:[HOSTADDR:]HOSTPORT:[GUESTADDR:]GUESTPORT | list | remove PROTO:[HOSTADDR:]HOSTPORT}",
	about: `Asks a running gonet gateway, through its control socket, to add a port
forward as its -forward flag does (the host listens on HOSTADDR:HOSTPORT,
0.0.0.0 when not given, an IPv6 address in brackets, and carries each
connection or UDP flow to GUESTADDR:GUESTPORT, the guest's IPv4 address
when not given), to list those running, one a line, or to remove one;
its connections already carried go on. With neither flag it asks the only
daemon running. Exits 0 on success, 1 when the daemon refuses or does not
answer.`,
	flags: func() *flag.FlagSet { fs, _ := forwardFlags(); return fs },
	run:   runForward,
}

func forwardFlags() (*flag.FlagSet, *controlFlags) {
	c := &controlFlags{}
	fs := newFlagSet("forward")
	c.register(fs)
	return fs, c
}

// parseForwardSpec parses a forward as add takes it, or as remove does,
// where the guest's port may be left out.
func parseForwardSpec(spec string, remove bool) (gateway.Forward, error) {
	f, err := gateway.ParseForward(spec)
	if err != nil && remove {
		if g, gerr := gateway.ParseForward(spec + ":1"); gerr == nil {
			return g, nil
		}
	}
	if err != nil {
		return f, usagef("%s", strings.TrimPrefix(err.Error(), "gateway: "))
	}
	return f, nil
}

func runForward(ctx context.Context, cmd *command, out *output, args []string) int {
	fs, c := forwardFlags()
	pos, err := parseInterspersed(fs, args)
	if err == nil {
		err = c.check()
	}
	var method string
	form := url.Values{}
	if err == nil {
		switch {
		case len(pos) == 1 && pos[0] == "list":
			method = http.MethodGet
		case len(pos) == 2 && (pos[0] == "add" || pos[0] == "remove"):
			method = http.MethodPost
			if pos[0] == "remove" {
				method = http.MethodDelete
			}
			_, err = parseForwardSpec(pos[1], pos[0] == "remove")
			form.Set("spec", pos[1])
		default:
			err = usagef("want add SPEC, list, or remove SPEC")
		}
	}
	if err != nil {
		return reportParseError(out, cmd, err)
	}
	path, err := c.socket()
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet forward: %v\n", err)
		return exitFail
	}
	body, err := askControl(ctx, path, method, forwardsPath, form)
	if err != nil {
		fmt.Fprintf(out.stderr, "gonet forward: %v\n", err)
		return exitFail
	}
	out.stdout.Write(body)
	return exitOK
}

// forwardsHandler answers gonet forward for g at forwardsPath, and passes
// every other request to next.
func forwardsHandler(g *gateway.Gateway, next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", next)
	mux.HandleFunc("GET "+forwardsPath, func(w http.ResponseWriter, r *http.Request) {
		for _, f := range g.Forwards() {
			io.WriteString(w, f.String()+"\n")
		}
	})
	change := func(remove bool) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			f, err := parseForwardSpec(r.FormValue("spec"), remove)
			if err == nil {
				if remove {
					err = g.RemoveForward(f)
				} else {
					err = g.AddForward(f)
				}
			}
			if err != nil {
				http.Error(w, strings.TrimPrefix(err.Error(), "gateway: "), http.StatusBadRequest)
			}
		}
	}
	mux.HandleFunc("POST "+forwardsPath, change(false))
	mux.HandleFunc("DELETE "+forwardsPath, change(true))
	return mux
}
