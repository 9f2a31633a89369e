package suite

import (
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"golang.org/x/sys/unix"
)

// Machine is what the results were measured on.
type Machine struct {
	NProc  int    `json:"nproc"`
	CPU    string `json:"cpu"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	GVisor string `json:"gvisor"`
	GoNet  string `json:"gonet"` // git commit of the work tree, "+dirty" when changed
	MemGiB int    `json:"mem_gib"`
	// CC is the kernel's default congestion control
	// (net.ipv4.tcp_congestion_control), which its senders run but in
	// bulk-cubic and the paths family.
	CC string `json:"cc,omitempty"`
	// Memmove is how Go's runtime copies 2 KiB or more here (its
	// cpuflags_amd64.go): the send path's copy into each super-segment
	// costs more from a misaligned source on one than on the other.
	Memmove string `json:"memmove,omitempty"`
}

// memmovePath is the copy Go's runtime picks for 2 KiB or more on a CPU
// of this vendor with these /proc/cpuinfo flags: REP MOVSQ on Intel with
// ERMS and FSRM when the destination is 16-byte aligned, AVX otherwise
// (or REP MOVS without AVX, which every CPU with FSRM has).
func memmovePath(vendor string, flags []string) string {
	has := func(f string) bool { return slices.Contains(flags, f) }
	switch {
	case !has("avx"):
		return "REP MOVS"
	case vendor == "GenuineIntel" && has("erms") && has("fsrm"):
		return "REP MOVSQ to a 16-byte-aligned destination, AVX to any other"
	default:
		return "AVX"
	}
}

func describeMachine() Machine {
	m := Machine{NProc: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		var vendor string
		var flags []string
		field := func(l, name string) (string, bool) {
			v, ok := strings.CutPrefix(l, name)
			return strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":")), ok
		}
		for _, l := range strings.Split(string(b), "\n") {
			if l == "" {
				break // the first processor's fields are enough
			}
			if v, ok := field(l, "model name"); ok {
				m.CPU = v
			} else if v, ok := field(l, "vendor_id"); ok {
				vendor = v
			} else if v, ok := field(l, "flags"); ok {
				flags = strings.Fields(v)
			}
		}
		if runtime.GOARCH == "amd64" {
			m.Memmove = memmovePath(vendor, flags)
		}
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Sysname[:]) + " " + unix.ByteSliceToString(u.Release[:])
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.MemGiB = int((uint64(si.Totalram)*uint64(si.Unit) + 1<<29) >> 30)
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "gvisor.dev/gvisor" {
				m.GVisor = d.Version
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_congestion_control"); err == nil {
		m.CC = strings.TrimSpace(string(b))
	}
	m.GoNet = gitVersion()
	return m
}

// gitVersion describes the work tree the suite was built from.
func gitVersion() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	v := strings.TrimSpace(string(out))
	// Changes to the stack count, not to the suite's own files.
	st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no", "--",
		":(top)", ":(top,exclude)bench", ":(top,exclude)BENCHMARKS.md", ":(top,exclude)Makefile").Output()
	if err == nil && len(strings.TrimSpace(string(st))) > 0 {
		v += "+dirty"
	}
	return v
}
