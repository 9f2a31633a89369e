package ratelimit_test

import (
	"sync"
	"testing"
	"time"

	"github.com/gonetstack/gonet/clock"
	"github.com/gonetstack/gonet/ratelimit"
)

// take counts how many of n messages the bucket allows now.
func take(b *ratelimit.Bucket, n int) int {
	ok := 0
	for range n {
		if b.Allow() {
			ok++
		}
	}
	return ok
}

func TestBucketAllowsABurstThenTheRate(t *testing.T) {
	tests := []struct {
		name        string
		rate, burst float64
		wait        time.Duration // after the burst is spent
		want        int           // allowed after the wait
	}{
		{"nothing back at once", 10, 5, 0, 0},
		{"a token per tenth of a second", 10, 5, 100 * time.Millisecond, 1},
		{"half a token is none", 10, 5, 50 * time.Millisecond, 0},
		{"refilled to the burst, no further", 10, 5, time.Hour, 5},
		{"1000 a second, as Linux's icmp_msgs_per_sec", 1000, 50, 20 * time.Millisecond, 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewVirtual(time.Unix(0, 0))
			b := ratelimit.New(tt.rate, tt.burst, clk)
			if got := take(b, 1000); got != int(tt.burst) {
				t.Fatalf("a full bucket allowed %d of 1000, want the burst %v", got, tt.burst)
			}
			clk.Advance(tt.wait)
			if got := take(b, 1000); got != tt.want {
				t.Errorf("after %v allowed %d, want %d", tt.wait, got, tt.want)
			}
		})
	}
}

func TestBucketKeepsFractionsOfATokenAcrossCalls(t *testing.T) {
	clk := clock.NewVirtual(time.Unix(0, 0))
	b := ratelimit.New(4, 1, clk)
	take(b, 1)
	allowed := 0
	// Four tokens a second, asked for every 100 ms for a second: the
	// quarter-second refill must not be lost to the calls in between.
	for range 10 {
		clk.Advance(100 * time.Millisecond)
		allowed += take(b, 1)
	}
	if allowed < 3 || allowed > 4 {
		t.Errorf("allowed %d in a second at 4 a second", allowed)
	}
}

func TestBucketSharedByGoroutinesGivesOutTheBurstOnce(t *testing.T) {
	clk := clock.NewVirtual(time.Unix(0, 0))
	b := ratelimit.New(1, 100, clk)
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := take(b, 50)
			mu.Lock()
			total += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if total != 100 {
		t.Errorf("8 goroutines were allowed %d, want the burst of 100", total)
	}
}
