package buffer_test

import (
	"testing"

	"github.com/gonetstack/gonet/budget"
	"github.com/gonetstack/gonet/buffer"
)

func TestQueueIsBoundedInPacketsAndBudget(t *testing.T) {
	for _, c := range []struct {
		name   string
		n      int   // the queue's bound in packets
		budget int64 // the budget's limit
		puts   int   // packets of 100 bytes offered
		want   int   // packets queued
	}{
		{"within both bounds every packet waits", 4, 1000, 3, 3},
		{"a full queue drops the new arrival", 2, 1000, 3, 2},
		{"the budget drops what it cannot back", 4, 250, 4, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			pool := buffer.NewPool()
			b := budget.New(c.budget)
			q := buffer.NewQueue(c.n, b)
			queued := 0
			for i := range c.puts {
				pk := pool.Get(100)
				pk.Bytes()[0] = byte(i)
				if q.Put(pk) {
					queued++
				}
			}
			if queued != c.want {
				t.Errorf("%d queued, want %d", queued, c.want)
			}
			if used := c.budget - b.Available(); used != int64(100*c.want) {
				t.Errorf("budget charged %d bytes for %d packets of 100", used, c.want)
			}
			for i := range c.want {
				pk := q.Take()
				if pk == nil || pk.Bytes()[0] != byte(i) {
					t.Fatalf("Take %d: %v, want packet %d, oldest first", i, pk, i)
				}
				pk.Release()
			}
			if pk := q.Take(); pk != nil {
				t.Errorf("Take of an empty queue = %v, want nil", pk)
			}
			if b.Available() != c.budget {
				t.Errorf("budget has %d available after everything was taken, want %d", b.Available(), c.budget)
			}
			if n := pool.Outstanding(); n != 0 {
				t.Errorf("%d packets leaked: a dropped arrival is released", n)
			}
		})
	}
}
