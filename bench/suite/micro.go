package suite

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// MicroBench is one of the stack's own Go benchmarks (go test -bench
// -benchmem on its packages): the allocations per packet of each layer.
type MicroBench struct {
	Pkg      string  `json:"pkg"`
	Name     string  `json:"name"`
	NsOp     float64 `json:"ns_op"`
	BytesOp  float64 `json:"bytes_op"`
	AllocsOp float64 `json:"allocs_op"`
}

// microBenchmarks runs the stack module's benchmarks in root and parses
// their results.
func microBenchmarks(ctx context.Context, root string, benchtime time.Duration) ([]MicroBench, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), "test", "-run=^$", "-bench=.", "-benchmem",
		"-benchtime="+benchtime.String(), "./...")
	cmd.Dir = root
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errb
	err := cmd.Run()
	res := parseBench(out.String())
	if err != nil {
		return res, fmt.Errorf("go test -bench in %s: %w: %s", root, err, firstLine(strings.TrimSpace(errb.String()+"\n"+out.String())))
	}
	return res, nil
}

// goTool is the go command: $GO (as the Makefile passes it) or "go".
func goTool() string {
	if g := os.Getenv("GO"); g != "" {
		return g
	}
	return "go"
}

func parseBench(s string) []MicroBench {
	var res []MicroBench
	pkg := ""
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		l := sc.Text()
		if p, ok := strings.CutPrefix(l, "pkg: "); ok {
			pkg = strings.TrimPrefix(strings.TrimSpace(p), "github.com/gonetstack/gonet/")
			continue
		}
		if !strings.HasPrefix(l, "Benchmark") {
			continue
		}
		f := strings.Fields(l)
		if len(f) < 4 {
			continue
		}
		b := MicroBench{Pkg: pkg, Name: strings.TrimPrefix(f[0], "Benchmark")}
		// Drop the -GOMAXPROCS suffix.
		if i := strings.LastIndex(b.Name, "-"); i > 0 {
			if _, err := strconv.Atoi(b.Name[i+1:]); err == nil {
				b.Name = b.Name[:i]
			}
		}
		for i := 2; i+1 < len(f); i++ {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			switch f[i+1] {
			case "ns/op":
				b.NsOp = v
			case "B/op":
				b.BytesOp = v
			case "allocs/op":
				b.AllocsOp = v
			}
		}
		res = append(res, b)
	}
	return res
}
