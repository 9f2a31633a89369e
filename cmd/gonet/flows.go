package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gonetstack/gonet/gateway"
	"github.com/gonetstack/gonet/services"
)

// A gateway's relayed flows, for gonet ss: the daemon answers at flowsPath
// with Gateway.Flows as JSON, and ss prints them after GoNet's connection
// table, each with both of its sides: the guest's view (its end and the
// peer it addressed) and the host socket's (its local end and its peer).
// A daemon with no gateway (gonet up) answers 404, and ss prints only the
// connection table.

const flowsPath = services.StatusPrefix + "flows"

// flowLister is what flowsHandler lists: a *gateway.Gateway, or a test's
// fake.
type flowLister interface {
	Flows() []gateway.FlowInfo
}

// flowsHandler answers GET flowsPath with g's flows, and passes every
// other request to next.
func flowsHandler(g flowLister, next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", next)
	mux.HandleFunc("GET "+flowsPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		flows := g.Flows()
		if flows == nil {
			flows = []gateway.FlowInfo{}
		}
		json.NewEncoder(w).Encode(flows)
	})
	return mux
}

// fetchFlows asks the daemon at path for its relayed flows; ok is false,
// with no error, when the daemon relays none because it is no gateway.
func fetchFlows(ctx context.Context, path string) (flows []gateway.FlowInfo, ok bool, err error) {
	body, err := askControl(ctx, path, http.MethodGet, flowsPath, nil)
	if se, isStatus := err.(*controlStatusError); isStatus && se.code == http.StatusNotFound {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(body, &flows); err != nil {
		return nil, false, fmt.Errorf("%s: reading the relayed flows: %w", path, err)
	}
	return flows, true, nil
}

// flowHeader names the relayed flows' columns: ss's for the guest's side,
// then the host socket's, the bytes (TCP) or datagrams (UDP) each way, and
// the flow's age and idle time.
var flowHeader = []string{"Proto", "Guest Address:Port", "Peer Address:Port", "Host Local Address:Port",
	"Host Peer Address:Port", "To-Host", "To-Guest", "Age", "Idle"}

// writeFlowTable prints a gateway's relayed flows, oldest first, under a
// line that says what they are; now dates their age and idle time.
func writeFlowTable(w io.Writer, flows []gateway.FlowInfo, now time.Time) error {
	fmt.Fprintf(w, "Relayed flows: %d\n", len(flows))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(flowHeader, "\t"))
	for _, f := range flows {
		proto := string(f.Proto)
		if f.Inbound {
			proto += "<" // the host's peer opened it, through a forward
		}
		fmt.Fprintln(tw, strings.Join([]string{proto, f.Guest.String(), f.Peer.String(), f.HostLocal.String(),
			f.HostRemote.String(), strconv.FormatUint(f.ToHost, 10), strconv.FormatUint(f.ToGuest, 10),
			flowAge(now.Sub(f.Since)), flowAge(now.Sub(f.LastActive))}, "\t"))
	}
	return tw.Flush()
}

// flowAge formats a duration to the second ("0s", "1m5s", "2h0m0s").
func flowAge(d time.Duration) string {
	return max(d, 0).Truncate(time.Second).String()
}
