// Package metrics gives GoNet's counters and gauges (a stats.Snapshot) in
// Prometheus' text exposition format, with the names and labels
// Prometheus' conventions ask for: "TCP.RetransSegs" becomes
// gonet_tcp_retrans_segs_total, "NIC.tap0.RxBytes" becomes
// gonet_nic_rx_bytes_total{nic="tap0"}. It is the daemon's and the status
// page's; the stack's own packages do not import it, so that they depend on
// the standard library alone.
package metrics

import (
	"strings"
	"unicode"

	"github.com/gonetstack/gonet/stats"
)

// Namespace begins every metric's name.
const Namespace = "gonet"

// NICLabel is the label that tells a NIC's counters apart.
const NICLabel = "nic"

// nicScoped are the layers whose dotted names carry a NIC's name after the
// layer ("NIC.tap0.RxFrames"): the NIC becomes a label, so that one metric
// sums or compares across NICs, as node_exporter's device label does. A
// bridge's ports ("Port.tap0.Flooded") are its NICs.
var nicScoped = map[string]bool{"NIC": true, "ARP": true, "NDP": true, "IGMP": true, "TAP": true, "Link": true, "DHCPClient": true, "Port": true}

// unitWords are the units Prometheus wants at the end of a name (before
// _total), wherever the field's name puts them ("BytesToHost").
var unitWords = map[string]bool{"bytes": true, "seconds": true}

// Name returns the Prometheus name of the value GoNet calls dotted, and
// the NIC it belongs to ("" for a stack-wide value). The layer, lower-cased,
// follows the namespace; each further part of the name is written in
// snake case ("RetransSegs" → retrans_segs, "ChallengeACKs" →
// challenge_acks); a unit, the sample's or one named in a word ("bytes"),
// goes last; a counter ends in _total. Characters Prometheus does not take
// in a name become underscores.
func Name(dotted string, x stats.Sample) (name, nic string) {
	parts := strings.Split(dotted, ".")
	layer, rest := parts[0], parts[1:]
	if nicScoped[layer] && len(rest) >= 2 {
		nic = strings.Join(rest[:len(rest)-1], ".")
		rest = rest[len(rest)-1:]
	}
	words := []string{Namespace, strings.ToLower(layer)}
	for _, p := range rest {
		words = append(words, snakeWords(p)...)
	}
	var units []string
	kept := words[:0]
	for i, w := range words {
		if i >= 2 && unitWords[w] {
			units = append(units, w)
			continue
		}
		kept = append(kept, w)
	}
	words = kept
	if x.Unit != "" && !containsUnit(units, x.Unit) {
		units = append(units, x.Unit)
	}
	words = append(words, units...)
	if x.Kind == stats.KindCounter {
		words = append(words, "total")
	}
	return sanitize(strings.Join(words, "_")), nic
}

func containsUnit(units []string, u string) bool {
	for _, v := range units {
		if v == u {
			return true
		}
	}
	return false
}

// snakeWords splits a Go identifier into lower-case words: a word begins
// at an upper-case letter after a lower-case one or a digit, and at the
// last upper-case letter of a run that a lower-case letter follows
// ("PMTUReductions" → pmtu, reductions). An acronym's plural stays whole
// ("ChallengeACKs" → challenge, acks; "ReasmOKs" → reasm, oks), as the
// kernel's MIB names have many, and so does a versioned one ("MLDv2Reports"
// → mldv2, reports), as /proc/net/snmp6's Icmp6InMLDv2Reports.
func snakeWords(s string) []string {
	r := []rune(s)
	var words []string
	start := 0
	for i := 1; i < len(r); i++ {
		prev, cur := r[i-1], r[i]
		if !unicode.IsUpper(cur) {
			continue
		}
		switch {
		case unicode.IsLower(prev) || unicode.IsDigit(prev):
		case unicode.IsUpper(prev) && i+1 < len(r) && unicode.IsLower(r[i+1]) && !acronymPlural(r, i+1) && !acronymVersion(r, i+1):
		default:
			continue
		}
		words = append(words, strings.ToLower(string(r[start:i])))
		start = i
	}
	return append(words, strings.ToLower(string(r[start:])))
}

// acronymPlural reports whether the lower-case letter at i is the plural s
// of the acronym before it: an "s" that ends the name or that an upper-case
// letter follows.
func acronymPlural(r []rune, i int) bool {
	return r[i] == 's' && (i+1 == len(r) || unicode.IsUpper(r[i+1]))
}

// acronymVersion reports whether the lower-case letter at i is the v of a
// version that the acronym before it carries: a "v" followed by a digit
// (MLDv2, ICMPv6).
func acronymVersion(r []rune, i int) bool {
	return r[i] == 'v' && i+1 < len(r) && unicode.IsDigit(r[i+1])
}

// sanitize turns what Prometheus' names do not take (anything but ASCII
// letters, digits and underscores) into underscores.
func sanitize(s string) string {
	return strings.Map(func(c rune) rune {
		if c < 128 && (c == '_' || unicode.IsLetter(c) || unicode.IsDigit(c)) {
			return c
		}
		return '_'
	}, s)
}
