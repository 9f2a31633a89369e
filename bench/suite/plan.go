package suite

import "time"

// Plan is what a run measures and for how long.
type Plan struct {
	Name string `json:"name"`
	Reps int    `json:"reps"`

	Pingers      []int         `json:"pingers"`
	PingDur      time.Duration `json:"ping_dur"`
	PingInterval time.Duration `json:"ping_interval"`

	ShortClients []int         `json:"short_clients"`
	ShortSize    int           `json:"short_size"`
	ShortDur     time.Duration `json:"short_dur"`

	BulkStreams []int         `json:"bulk_streams"`
	BulkDur     time.Duration `json:"bulk_dur"`
	// BulkStreamsCubic are bulk's points again with every sender on
	// CUBIC (bulk-cubic), where bulk's run each its own default.
	BulkStreamsCubic []int `json:"bulk_streams_cubic,omitempty"`

	RRConns []int         `json:"rr_conns"`
	RRDur   time.Duration `json:"rr_dur"`

	UDPSizes []int         `json:"udp_sizes"`
	UDPRates []float64     `json:"udp_rates_mbit_s"` // 0: as fast as the sender can
	UDPDur   time.Duration `json:"udp_dur"`

	ScaleConns int `json:"scale_conns"`

	// The IPv6 variants (issue 12): ping, bulk and request-response at
	// these points, with the IPv4 workloads' durations, each group next
	// to its IPv4 counterpart so that both meet the same machine.
	Pingers6     []int `json:"pingers6,omitempty"`
	BulkStreams6 []int `json:"bulk_streams6,omitempty"`
	RRConns6     []int `json:"rr_conns6,omitempty"`
	// Reps6 is the IPv6 variants' repetitions (0: Reps): their bound,
	// GoNet within 5% of its IPv4 figures, is finer than three
	// repetitions of a paired ratio settle on two shared cores. Those
	// beyond Reps run at the end.
	Reps6 int `json:"reps6,omitempty"`
	// BulkSlice6 cuts bulk6's runs in slices this long, each with
	// connections of its own, GoNet's taking its IPv6 and IPv4 address
	// in turn (load.BulkSliced); 0: whole runs, paired by withIPv4Twin.
	// Nine pairs of 3 s runs spread 0.73-1.09 on AMD, of 500 ms slices
	// with sd 0.054, of 250 ms slices 0.027-0.062 (ARCHITECTURE.md).
	BulkSlice6 time.Duration `json:"bulk_slice6,omitempty"`

	// Issue 16's small packets: pingers at PacedInterval and in a
	// closed loop (PingDur a point), and UDP request-response on these
	// numbers of sockets (RRDur a point).
	PacedPingers  []int         `json:"paced_pingers,omitempty"`
	PacedInterval time.Duration `json:"paced_interval,omitempty"`
	UDPRRSockets  []int         `json:"udprr_sockets,omitempty"`
	// Issue 16's overload: these numbers of connections answering
	// bursts for BurstDur, BurstPause between one burst's end and the
	// next.
	BurstConns []int         `json:"burst_conns,omitempty"`
	BurstDur   time.Duration `json:"burst_dur,omitempty"`
	BurstPause time.Duration `json:"burst_pause,omitempty"`
	// Issue 16's daemon: gonet up's discard and chargen with these
	// numbers of streams (BulkDur), its echo on these numbers of
	// connections (RRDur).
	DaemonStreams []int `json:"daemon_streams,omitempty"`
	DaemonRRConns []int `json:"daemon_rr_conns,omitempty"`

	ProfileDur time.Duration `json:"profile_dur"` // 0: no profiles

	// The gateway family (issue 11): each gateway at each guest MTU.
	Gateway GatewayPlan `json:"gateway"`
	// The multikernel family (issue 13): two GoNet processes over a ring,
	// a bridge's rings, TAPs on a Linux bridge; the kernel over a veth.
	Multikernel MultikernelPlan `json:"multikernel"`

	// The real-world paths family (issue 16, paths.go).
	Paths PathsPlan `json:"paths"`

	// MicroBenchTime is -benchtime for the stack's own Go benchmarks
	// (allocations per packet, layer by layer); 0: not run.
	MicroBenchTime time.Duration `json:"micro_benchtime"`

	// QuietWait bounds the time the run waits, in all, for other
	// processes to leave the CPUs before a set-up.
	QuietWait time.Duration `json:"quiet_wait"`
}

// GatewayPlan is what the gateway family measures through each gateway,
// guest to internet and back.
type GatewayPlan struct {
	// Reps bounds the family's repetitions (0: the plan's): four
	// gateways at two MTUs take as long as the whole stack comparison.
	Reps        int           `json:"reps,omitempty"`
	MTUs        []int         `json:"mtus"` // the guest's; a gateway with a lower maximum runs at its maximum
	BulkStreams []int         `json:"bulk_streams"`
	BulkDur     time.Duration `json:"bulk_dur"`
	RRDur       time.Duration `json:"rr_dur"`
	CRRClients  []int         `json:"crr_clients"`
	CRRDur      time.Duration `json:"crr_dur"`
	UDPSize     int           `json:"udp_size"`
	UDPRates    []float64     `json:"udp_rates_mbit_s"`
	UDPDur      time.Duration `json:"udp_dur"`
	IdleConns   int           `json:"idle_conns"`
	// IdleSettle is how long the idle flows sit before the gateway's
	// memory is read a second time: a Go gateway's heap settles after
	// its collector has run.
	IdleSettle time.Duration `json:"idle_settle"`
}

// MultikernelPlan is what the multikernel family measures between the two
// ends of each set-up.
type MultikernelPlan struct {
	Reps       int           `json:"reps,omitempty"` // 0: the plan's
	TCPStreams []int         `json:"tcp_streams"`
	TCPDur     time.Duration `json:"tcp_dur"` // whole seconds: iperf3's -t
	RRDur      time.Duration `json:"rr_dur"`
	UDPSizes   []int         `json:"udp_sizes"`
	// UDPRates are the offered rates in Mbit/s; with UDPSaturation, each
	// size's saturation (the sender unpaced) is measured first, and 80%
	// of it offered besides these.
	UDPRates      []float64     `json:"udp_rates_mbit_s"`
	UDPSaturation bool          `json:"udp_saturation"`
	UDPDur        time.Duration `json:"udp_dur"` // whole seconds
	// RingSizes are the direct ring's descriptors per direction for the
	// loss-against-ring-size points, 1472-byte datagrams at 80% of the
	// default ring's saturation (RingRate Mbit/s when not measured).
	RingSizes []int   `json:"ring_sizes"`
	RingRate  float64 `json:"ring_rate_mbit_s"`
}

// Full is make bench: every workload at every size, three repetitions,
// within about 47 minutes on two cores (the IPv6 variants, nine times
// over, 11 of them; the multikernel family, twice over, 4; issue 16's
// workloads 4; the paths family, once, 9).
var Full = Plan{
	Name: "full",
	Reps: 3,
	// Nine pairs: five let one pair caught in a slow spell of the
	// machine's copies (ARCHITECTURE.md, "Measured decisions") move the
	// median by the 5% being judged.
	Reps6:        9,
	Pingers:      []int{1, 10, 100, 500, 1000},
	PingDur:      2 * time.Second,
	PingInterval: 20 * time.Millisecond,
	ShortClients: []int{1, 10, 100, 1000},
	ShortSize:    4096,
	ShortDur:     2 * time.Second,
	BulkStreams:  []int{1, 4},
	BulkDur:      3 * time.Second,
	// About 2 minutes more on two cores.
	BulkStreamsCubic: []int{1, 4},
	RRConns:          []int{1, 100},
	RRDur:            2 * time.Second,
	UDPSizes:         []int{64, 1472, 8192, 32768},
	UDPRates:         []float64{10, 100, 1000, 0},
	UDPDur:           time.Second,
	ScaleConns:       10000,
	// Two points each for ping and request-response, one stream each way
	// for bulk: about 3 minutes more on two cores.
	Pingers6:     []int{1, 100},
	BulkStreams6: []int{1},
	BulkSlice6:   250 * time.Millisecond,
	RRConns6:     []int{1, 100},
	ProfileDur:   3 * time.Second,
	// Issue 16: about 4 minutes more on two cores (measured: the paced
	// and closed-loop pings 45 s, UDP request-response 40 s, the
	// overload 70 s, the daemon 55 s, set-ups included).
	PacedPingers:  []int{1000},
	PacedInterval: 10 * time.Millisecond,
	UDPRRSockets:  []int{1, 100},
	BurstConns:    []int{1000, 5000},
	BurstDur:      2 * time.Second,
	BurstPause:    20 * time.Millisecond,
	DaemonStreams: []int{1, 4},
	DaemonRRConns: []int{1, 100},
	Gateway: GatewayPlan{
		Reps:        2,
		MTUs:        []int{65520, 1500},
		BulkStreams: []int{1, 4},
		BulkDur:     2 * time.Second,
		RRDur:       time.Second,
		CRRClients:  []int{1, 16},
		CRRDur:      time.Second,
		UDPSize:     1472,
		UDPRates:    []float64{100, 1000},
		UDPDur:      time.Second,
		IdleConns:   2000,
		IdleSettle:  2 * time.Second,
	},
	// About 4 minutes on two cores: 2 repetitions of 4 set-ups × (2 TCP
	// points of 2 s, 1 RR of 1 s, 3 sizes × 5 UDP points of 1 s) and 5
	// ring sizes, each iperf3 test some 0.3 s more for its set-up, and
	// each direct-ring point two processes started afresh (one
	// repetition took 85 s on a busy machine, before 300 Mbit/s).
	Multikernel: MultikernelPlan{
		Reps:          2,
		TCPStreams:    []int{1, 4},
		TCPDur:        2 * time.Second,
		RRDur:         time.Second,
		UDPSizes:      []int{64, 1472, 8192},
		UDPRates:      []float64{100, 300, 1000},
		UDPSaturation: true,
		UDPDur:        time.Second,
		RingSizes:     []int{8, 32, 128, 512, 2048},
		RingRate:      1000,
	},
	// About 9 minutes on two cores: the 100 MB transfer on path (a)
	// without loss only (bench/README.md says why).
	Paths: PathsPlan{
		Reps:       1,
		Paths:      IssuePaths,
		Dirs:       []string{"down", "up"},
		Short:      1 << 20,
		ShortCount: 3,
		ShortCap:   20 * time.Second,
		LongDur:    10 * time.Second,
		LongCap:    30 * time.Second,
		CalDur:     6 * time.Second,
		CalStreams: 4,
		CalPing:    time.Second,
		Share:      "a0",
		ShareGap:   5 * time.Second,
		ShareDur:   20 * time.Second,
	},

	MicroBenchTime: 200 * time.Millisecond,
	QuietWait:      4 * time.Minute,
}

// Quick is make bench-quick, CI's smoke run: every stack set up, every
// workload once at its smallest size, for a fraction of a second.
var Quick = Plan{
	Name:             "quick",
	Reps:             1,
	Pingers:          []int{1},
	PingDur:          500 * time.Millisecond,
	PingInterval:     20 * time.Millisecond,
	ShortClients:     []int{1},
	ShortSize:        4096,
	ShortDur:         500 * time.Millisecond,
	BulkStreams:      []int{1},
	BulkDur:          500 * time.Millisecond,
	BulkStreamsCubic: []int{1},
	RRConns:          []int{1},
	RRDur:            500 * time.Millisecond,
	UDPSizes:         []int{64},
	UDPRates:         []float64{10},
	UDPDur:           500 * time.Millisecond,
	ScaleConns:       100,
	Pingers6:         []int{1},
	BulkStreams6:     []int{1},
	BulkSlice6:       250 * time.Millisecond,
	RRConns6:         []int{1},
	ProfileDur:       500 * time.Millisecond,
	// Issue 16's workloads, each at its smallest point.
	PacedPingers:  []int{1},
	PacedInterval: 10 * time.Millisecond,
	UDPRRSockets:  []int{1},
	BurstConns:    []int{100},
	BurstDur:      300 * time.Millisecond,
	BurstPause:    20 * time.Millisecond,
	DaemonStreams: []int{1},
	DaemonRRConns: []int{1},
	Gateway: GatewayPlan{
		MTUs:        []int{1500},
		BulkStreams: []int{1},
		BulkDur:     300 * time.Millisecond,
		RRDur:       300 * time.Millisecond,
		CRRClients:  []int{1},
		CRRDur:      300 * time.Millisecond,
		UDPSize:     64,
		UDPRates:    []float64{10},
		UDPDur:      300 * time.Millisecond,
		IdleConns:   50,
		IdleSettle:  100 * time.Millisecond,
	},
	// Each set-up once at its smallest point (iperf3 runs whole seconds).
	Multikernel: MultikernelPlan{
		TCPStreams: []int{1},
		TCPDur:     time.Second,
		RRDur:      300 * time.Millisecond,
		UDPSizes:   []int{64},
		UDPRates:   []float64{100},
		UDPDur:     time.Second,
		RingSizes:  []int{64},
		RingRate:   100,
	},
	// One 1 MB transfer from each stack over path (a) without loss, and
	// the calibration's ping and a second of bulk: the forwarder's smoke
	// test.
	Paths: PathsPlan{
		Paths:      IssuePaths[:1],
		Dirs:       []string{"down"},
		Short:      1 << 20,
		ShortCount: 1,
		ShortCap:   20 * time.Second,
		CalDur:     time.Second,
		CalStreams: 4,
		CalPing:    500 * time.Millisecond,
	},
	QuietWait: 30 * time.Second,
}
