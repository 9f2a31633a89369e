package suite

import (
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
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
}

func describeMachine() Machine {
	m := Machine{NProc: runtime.NumCPU(), Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				m.CPU = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
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
