package suite

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseMIB(t *testing.T) {
	m := map[string]int64{}
	parseMIB("Tcp: RtoAlgorithm OutSegs RetransSegs\nTcp: 1 200 3\nFoo: A\nFoo: 1\nUdp: InDatagrams\nUdp: 7\n", m)
	if m["Tcp.OutSegs"] != 200 || m["Tcp.RetransSegs"] != 3 || m["Udp.InDatagrams"] != 7 {
		t.Fatalf("%v", m)
	}
	if _, ok := m["Foo.A"]; ok {
		t.Fatal("kept an unwanted MIB")
	}
}

func TestParseBench(t *testing.T) {
	out := `goos: linux
pkg: github.com/gonetstack/gonet/ipv4
BenchmarkEchoReply/batch=1/size=56-2         	  235084	      5497 ns/op	  10.19 MB/s	       0 B/op	       0 allocs/op
BenchmarkReassembly-2                        	   68658	     16976 ns/op	 176.72 MB/s	    1209 B/op	      11 allocs/op
PASS
`
	b := parseBench(out)
	if len(b) != 2 || b[0].Pkg != "ipv4" || b[0].Name != "EchoReply/batch=1/size=56" || b[0].NsOp != 5497 {
		t.Fatalf("%+v", b)
	}
	if b[1].AllocsOp != 11 || b[1].BytesOp != 1209 {
		t.Fatalf("%+v", b[1])
	}
}

func TestAggregateAndCheck(t *testing.T) {
	res := Results{Records: []Record{
		{Workload: "bulk", Point: "up/1", Stack: "gonet", Rep: 1, Metrics: map[string]float64{"gbit_s": 3}},
		{Workload: "bulk", Point: "up/1", Stack: "gonet", Rep: 2, Metrics: map[string]float64{"gbit_s": 1}},
		{Workload: "bulk", Point: "up/1", Stack: "gonet", Rep: 3, Metrics: map[string]float64{"gbit_s": 2}},
		{Workload: "bulk", Point: "up/1", Stack: "gvisor", Rep: 1, Error: "boom"},
	}}
	a := aggregate(res.Records)
	s := a[aggKey{"bulk", "up/1", "gonet"}]["gbit_s"]
	if s.Med != 2 || s.Min != 1 || s.Max != 3 || s.N != 3 {
		t.Fatalf("%+v", s)
	}
	missing, _ := Check(res)
	if len(missing) == 0 || !strings.Contains(missing[0], "gvisor: boom") {
		t.Fatalf("%v", missing)
	}
	r := newReport(res)
	if c := r.cell("bulk", "up/1", "gonet", "gbit_s", 1); c != "2.00 [1.00–3.00]" {
		t.Fatalf("cell %q", c)
	}
	if c := r.cell("bulk", "up/1", "gvisor", "gbit_s", 1); c != "fail" {
		t.Fatalf("cell %q", c)
	}
}

func TestGatewayPointsNameTheirMTUAndDirection(t *testing.T) {
	for _, c := range []struct{ pt, want string }{
		{"mtu=65520/up/1", "MTU 65520, guest→internet, 1 stream(s)"},
		{"mtu=1500/down/4", "MTU 1500, internet→guest, 4 stream(s)"},
		{"mtu=1500/size=1472,rate=100", "MTU 1500, guest→internet, 1472 B at 100 Mbit/s"},
		{"mtu=1500/down/size=1472,rate=1000", "MTU 1500, internet→guest, 1472 B at 1000 Mbit/s"},
	} {
		if got := gwPointName(c.pt); got != c.want {
			t.Errorf("gwPointName(%q) = %q, want %q", c.pt, got, c.want)
		}
	}
	if got := crrName("mtu=1500/n=16"); got != "MTU 1500, 16 client(s)" {
		t.Errorf("crrName: %q", got)
	}
}

func TestAPeerGatewaysBugDoesNotFailTheCheckButGoNetsDoes(t *testing.T) {
	ok := map[string]float64{"gbit_s": 1}
	for _, c := range []struct {
		name        string
		recs        []Record
		wantMissing int
	}{
		{"a peer failing one workload it otherwise runs", []Record{
			{Workload: gwBulk, Point: "mtu=1500/up/1", Stack: "pasta", Error: "reset"},
			{Workload: gwBulk, Point: "mtu=1500/down/1", Stack: "pasta", Metrics: ok},
			{Workload: gwBulk, Point: "mtu=1500/up/1", Stack: "gonet", Metrics: ok},
		}, 0},
		{"a peer that never came up", []Record{
			{Workload: gwBulk, Point: "mtu=1500/up/1", Stack: "pasta", Error: "set up"},
			{Workload: gwBulk, Point: "mtu=1500/up/1", Stack: "gonet", Metrics: ok},
		}, 1},
		{"GoNet failing", []Record{
			{Workload: gwBulk, Point: "mtu=1500/up/1", Stack: "gonet", Error: "reset"},
			{Workload: gwBulk, Point: "mtu=1500/down/1", Stack: "gonet", Metrics: ok},
		}, 1},
	} {
		missing, _ := Check(Results{Records: c.recs, Workloads: []string{gwBulk}})
		if len(missing) != c.wantMissing {
			t.Errorf("%s: missing %v, want %d", c.name, missing, c.wantMissing)
		}
	}
}

func TestReadProcSeesThisProcess(t *testing.T) {
	s, err := readProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.rss <= 0 || s.cpu < 0 {
		t.Fatalf("%+v", s)
	}
}

func TestAGatewayOnlyRunKeepsTheEarlierStackRecords(t *testing.T) {
	dir := t.TempDir()
	earlier := Results{
		Records: []Record{
			{Workload: "bulk", Point: "up/1", Stack: "gonet", Metrics: map[string]float64{"gbit_s": 6}},
			{Workload: gwBulk, Point: "mtu=1500/up/1", Stack: "gonet", Metrics: map[string]float64{"gbit_s": 1}},
		},
		Profiles: []ProfileSummary{{Stack: "gonet", Workload: "bulk"}},
	}
	b, err := json.Marshal(earlier)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	s := &Suite{OutDir: dir, Log: io.Discard}
	s.res = Results{
		Records:   []Record{{Workload: gwBulk, Point: "mtu=1500/up/1", Stack: "gonet", Metrics: map[string]float64{"gbit_s": 2}}},
		Workloads: []string{gwBulk},
		Gateway:   &GatewayRun{Reps: 1},
	}
	if err := s.mergeEarlier(); err != nil {
		t.Fatal(err)
	}
	var bulk, gw []float64
	for _, r := range s.res.Records {
		switch r.Workload {
		case "bulk":
			bulk = append(bulk, r.Metrics["gbit_s"])
		case gwBulk:
			gw = append(gw, r.Metrics["gbit_s"])
		}
	}
	if len(bulk) != 1 || bulk[0] != 6 || len(gw) != 1 || gw[0] != 2 {
		t.Errorf("merged records: stack bulk %v, gateway bulk %v; want [6] and [2]", bulk, gw)
	}
	if len(s.res.Profiles) != 1 || s.res.Gateway == nil || !slices.Contains(s.res.Workloads, "scale") || !slices.Contains(s.res.Workloads, gwBulk) {
		t.Errorf("merged results lost the earlier run's profiles or workloads: %+v", s.res)
	}
}

// A killed run's /etc/netns directories go once its process is gone; those
// of live runs and of anything else stay.
func TestRemoveStaleEtcRemovesOnlyDeadRunsDirectories(t *testing.T) {
	dir := t.TempDir()
	dead := 1 << 22 // above pid_max's default, so no process has it
	for dead++; ; dead++ {
		if _, err := os.Stat(fmt.Sprint("/proc/", dead)); err != nil {
			break
		}
	}
	names := map[string]bool{ // name: removed
		fmt.Sprintf("%s-%d-3", nsPrefix, dead):        true,
		fmt.Sprintf("%s-%d-3", nsPrefix, os.Getpid()): false,
		"someone-elses":         false,
		nsPrefix + "-notapid-1": false,
	}
	for name := range names {
		if err := os.MkdirAll(filepath.Join(dir, name, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := removeStaleEtc(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(removed) != 1 {
		t.Errorf("removed %v, want one directory", removed)
	}
	for name, gone := range names {
		_, err := os.Stat(filepath.Join(dir, name))
		if gotGone := os.IsNotExist(err); gotGone != gone {
			t.Errorf("%s removed: %v, want %v", name, gotGone, gone)
		}
	}
	if removed, err := removeStaleEtc(filepath.Join(dir, "absent")); err != nil || removed != nil {
		t.Errorf("an absent directory: %v, %v", removed, err)
	}
}

// A run of some of the stack comparison's workloads refuses to replace an
// earlier results.json holding others, which it would not merge into; a
// record of the same workloads alone, or none, it writes over.
func TestAStackOnlyRunRefusesToReplaceAFullerRecord(t *testing.T) {
	for _, c := range []struct {
		name    string
		earlier []string // workloads of the earlier record; nil: none
		wantErr string
	}{
		{"a full record", []string{"ping", "bulk", "bulk-cubic", "gw-bulk"}, "whose run has ping, gw-bulk too"},
		{"the same workloads", []string{"bulk", "bulk-cubic"}, ""},
		{"no record", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.earlier != nil {
				var old Results
				for _, w := range c.earlier {
					old.Records = append(old.Records, Record{Workload: w, Point: "p", Stack: "gonet", Rep: 1})
				}
				b, err := json.Marshal(old)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, "results.json"), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s := &Suite{OutDir: dir, Only: []string{"bulk", "bulk-cubic"}}
			s.res.Workloads = []string{"bulk", "bulk-cubic"}
			err := s.wouldReplace()
			switch {
			case c.wantErr == "" && err != nil:
				t.Errorf("wouldReplace = %v, want nil", err)
			case c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "-replace")):
				t.Errorf("wouldReplace = %v, want an error saying %q and naming -replace", err, c.wantErr)
			}
		})
	}
}
