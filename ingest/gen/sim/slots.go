package sim

import (
	"context"
	"math"
	"sync"
	"time"
)

// slotPool is a FIFO semaphore of decode slots that also integrates the
// number of busy slots over time. Its zero value is not usable; see
// newSlotPool.
type slotPool struct {
	size int

	mu      sync.Mutex
	running int
	waiting int       // queued waiters not yet granted or canceled
	queue   []*waiter // FIFO; canceled waiters are skipped
	head    int

	started bool
	t0      time.Time // first acquire
	last    time.Time // time up to which busy and buckets are integrated
	busy    float64   // integral of running over time, slot-seconds
	buckets []float64 // slot-seconds in each whole second since t0
	maxRun  int
}

// waiter is one queued acquire. granted and canceled are guarded by the
// pool's mutex; ch is closed on grant.
type waiter struct {
	ch       chan struct{}
	granted  bool
	canceled bool
}

func newSlotPool(size int) *slotPool { return &slotPool{size: size} }

// acquire takes a slot, waiting in FIFO order behind earlier callers. It
// returns ctx.Err() if ctx ends first; the slot is then not held.
func (p *slotPool) acquire(ctx context.Context) error {
	p.mu.Lock()
	now := time.Now()
	if !p.started {
		p.started, p.t0, p.last = true, now, now
	}
	p.advance(now)
	if p.running < p.size && p.waiting == 0 {
		p.running++
		p.maxRun = max(p.maxRun, p.running)
		p.mu.Unlock()
		return nil
	}
	w := &waiter{ch: make(chan struct{})}
	p.queue = append(p.queue, w)
	p.waiting++
	p.mu.Unlock()

	var err error
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		err = ctx.Err()
	}
	p.mu.Lock()
	if w.granted {
		p.mu.Unlock()
		p.release()
		return err
	}
	w.canceled = true
	p.waiting--
	p.mu.Unlock()
	return err
}

// release gives the slot back, handing it to the first live waiter if any.
func (p *slotPool) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(time.Now())
	for p.head < len(p.queue) {
		w := p.queue[p.head]
		p.queue[p.head] = nil
		p.head++
		if p.head > 64 && p.head*2 > len(p.queue) {
			p.queue = append(p.queue[:0], p.queue[p.head:]...)
			p.head = 0
		}
		if w.canceled {
			continue
		}
		w.granted = true
		p.waiting--
		close(w.ch)
		return
	}
	p.running--
}

// advance integrates the running count from p.last to now. p.mu is held.
func (p *slotPool) advance(now time.Time) {
	if !p.started || !now.After(p.last) {
		return
	}
	a := p.last.Sub(p.t0).Seconds()
	b := now.Sub(p.t0).Seconds()
	r := float64(p.running)
	p.busy += r * (b - a)
	hi := int(b)
	for len(p.buckets) <= hi {
		p.buckets = append(p.buckets, 0)
	}
	if r > 0 {
		for i := int(a); i <= hi; i++ {
			lo, up := math.Max(a, float64(i)), math.Min(b, float64(i+1))
			if up > lo {
				p.buckets[i] += r * (up - lo)
			}
		}
	}
	p.last = now
}

// poolSnapshot is the pool state at one moment.
type poolSnapshot struct {
	running, waiting, maxRunning int
	busy                         float64
}

func (p *slotPool) snapshot() poolSnapshot {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.advance(time.Now())
	return poolSnapshot{running: p.running, waiting: p.waiting, maxRunning: p.maxRun, busy: p.busy}
}

// series returns the fraction of slots busy in each second since the first
// acquire. The last, partial second is normalized by its elapsed part.
func (p *slotPool) series() []float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.started {
		return nil
	}
	now := time.Now()
	p.advance(now)
	out := make([]float64, len(p.buckets))
	elapsed := now.Sub(p.t0).Seconds()
	for i, v := range p.buckets {
		span := math.Min(1, elapsed-float64(i))
		if span > 0 {
			out[i] = v / (span * float64(p.size))
		}
	}
	return out
}
