// Command client-go-v0.37-workqueue is the client-go v0.37 peer of ferrokube's workqueue benchmark
// (scripts/bench-workqueue-peers.sh): the workloads of benches/WORKLOADS.md (W1–W5 as revised on
// 2026-11-28, and W2m, the old mixed W2) on
// k8s.io/client-go/util/workqueue at v0.37.2, built in module mode with the machine's Go (build.sh
// beside the folder). One JSON line per run on stdout, everything else on stderr.
//
//	client-go-v0.37-workqueue --workload W3 [--items string|any] [--scale 0.1]
//
// (-flag works too.) Which queue:
//
//	--items string (default)  the generic queues a current controller uses, keyed by a Go string:
//	                          workqueue.NewTyped[string] (W1–W3, W2m), NewTypedDelayingQueue[string] (W4),
//	                          NewTypedRateLimitingQueue[string] with
//	                          NewTypedItemExponentialFailureRateLimiter[string](1µs, 1s) (W5): the
//	                          TypedRateLimitingInterface that controller-runtime's controllers sit on.
//	                          "impl": "client-go-v0.37.2".
//	--items any               the same queues instantiated with any, which is what the deprecated
//	                          untyped constructors (New, NewDelayingQueue, NewRateLimitingQueue) return
//	                          in v0.37 (Type = Typed[any]): the API the v1.20 peer used, keys boxed
//	                          before the clock starts. "impl": "client-go-v0.37.2-any".
//
// Exit status as WORKLOADS.md says: 0 ok; 1 a run failed its check (W2: every key exactly once, 10,000
// items; W3: 1,000,000 items; W5: 600,000 gets and 100,000 successes); 2 usage error or
// SplitMix64 vectors wrong; 3 a workload name (W<n>) this peer cannot run.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// ---------------------------------------------------------------------------------------------
// SplitMix64 (WORKLOADS.md); Go's uint64 arithmetic wraps as the definition asks.

type splitMix64 struct{ state uint64 }

func (r *splitMix64) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// vectorsOK checks WORKLOADS.md's test vectors; the program refuses to run without them.
func vectorsOK() error {
	cases := []struct {
		seed   uint64
		modulo uint64 // 0: the raw draw
		want   []uint64
	}{
		{1000, 0, []uint64{4332104999045480776, 15022492692291828655, 14266957338849687121}},
		{2000, 0, []uint64{13609660699017974483, 883804695291935563, 1885940644450548452}},
		{1003, 10000, []uint64{1864, 8462, 6476}},
	}
	for _, c := range cases {
		r := splitMix64{c.seed}
		for i, want := range c.want {
			got := r.next()
			if c.modulo != 0 {
				got %= c.modulo
			}
			if got != want {
				return fmt.Errorf("SplitMix64 seed %d draw %d (mod %d): got %d, want %d", c.seed, i, c.modulo, got, want)
			}
		}
	}
	return nil
}

// ---------------------------------------------------------------------------------------------
// Output: one JSON line, "extra" in a fixed order.

type field struct {
	name  string
	value any
}

type outcome struct {
	workload string
	items    int
	secs     float64
	extra    []field
}

// jsonNumber is a float as JSON, null when it is not finite.
func jsonNumber(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

func (o outcome) line(impl string) string {
	enc := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			return "null"
		}
		return string(b)
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, `{"impl":%s,"workload":%s,"items":%d,"secs":%s,"per_sec":%s,"extra":{`,
		enc(impl), enc(o.workload), o.items, enc(jsonNumber(o.secs)), enc(jsonNumber(float64(o.items)/o.secs)))
	for i, f := range o.extra {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(enc(f.name) + ":" + enc(f.value))
	}
	sb.WriteString("}}")
	return sb.String()
}

// ---------------------------------------------------------------------------------------------
// The harness, generic over the queue's item type.

// bench runs the workloads on queues of T; key turns a prepared key string into the item that is
// handed to the queue (done before any clock starts), name turns an item back into its string.
type bench[T comparable] struct {
	scale float64
	key   func(string) T
	name  func(T) string
}

// count scales a count by --scale (rounded, at least 1); without --scale it is unchanged.
func (b bench[T]) count(n int) int {
	if b.scale == 0 {
		return n
	}
	return max(1, int(math.Round(float64(n)*b.scale)))
}

// keys prepares prefix0 … prefix(n-1) as items before the clock starts.
func (b bench[T]) keys(prefix string, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = b.key(prefix + strconv.Itoa(i))
	}
	return out
}

// gate holds every goroutine of a run until the clock has started (WORKLOADS.md, "Start").
type gate struct {
	arrived sync.WaitGroup
	open    chan struct{}
	t0      time.Time
}

func newGate(parties int) *gate {
	g := &gate{open: make(chan struct{})}
	g.arrived.Add(parties)
	return g
}

// enter is called by each goroutine; it returns the clock start once the gate opens.
func (g *gate) enter() time.Time {
	g.arrived.Done()
	<-g.open
	return g.t0
}

// start waits for every party, reads the clock, then opens the gate.
func (g *gate) start() time.Time {
	g.arrived.Wait()
	g.t0 = time.Now()
	close(g.open)
	return g.t0
}

// W1: one goroutine adds every key, then gets and dones each one.
func (b bench[T]) w1() (outcome, error) {
	n := b.count(1_000_000)
	keys := b.keys("ns/name-", n)
	q := workqueue.NewTyped[T]()

	t0 := time.Now()
	for _, k := range keys {
		q.Add(k)
	}
	got := 0
	for range n {
		item, shutdown := q.Get()
		if shutdown {
			break
		}
		q.Done(item)
		got++
	}
	secs := time.Since(t0).Seconds()
	q.ShutDown()
	runtime.KeepAlive(keys)
	if got != n {
		return outcome{}, fmt.Errorf("W1 got %d keys, expected %d", got, n)
	}
	return outcome{workload: "W1", items: got, secs: secs}, nil
}

// consumersStart says when drain's consumers begin: with the clock (W2m, W3), or only once every
// producer has returned and producersSecs is read (W2 since 2026-11-28, so that adds race no
// consumer and adds/s measures the queue rather than how far the consumers lag).
type consumersStart int

const (
	withProducers consumersStart = iota
	afterProducers
)

// drain runs W2/W2m/W3's shape: each stream has its producer, consumers get → done until
// shutdown, which main calls once every producer has returned. Every goroutine exists before the
// clock starts: with afterProducers the consumers wait at a second gate that main opens right
// after reading producersSecs. It returns the items handed out, the seconds from the start to the
// last Done, and the producers' seconds.
func (b bench[T]) drain(streams [][]T, consumers int, start consumersStart) (int, float64, float64) {
	q := workqueue.NewTyped[T]()
	clockParties := len(streams)
	if start == withProducers {
		clockParties += consumers
	}
	clock := newGate(clockParties)
	consumerGate := clock
	if start == afterProducers {
		consumerGate = newGate(consumers)
	}

	items := make([]int, consumers)
	last := make([]time.Time, consumers)
	var consumed sync.WaitGroup
	for c := range consumers {
		consumed.Go(func() {
			consumerGate.enter()
			n := 0
			var at time.Time
			for {
				item, shutdown := q.Get()
				if shutdown {
					break
				}
				q.Done(item)
				at = time.Now()
				n++
			}
			items[c], last[c] = n, at
		})
	}
	var produced sync.WaitGroup
	for _, stream := range streams {
		produced.Go(func() {
			clock.enter()
			for _, k := range stream {
				q.Add(k)
			}
		})
	}

	t0 := clock.start()
	produced.Wait()
	producersSecs := time.Since(t0).Seconds()
	if start == afterProducers {
		consumerGate.start()
	}
	q.ShutDown()
	consumed.Wait()

	total, end := 0, t0
	for c := range consumers {
		total += items[c]
		if last[c].After(end) {
			end = last[c]
		}
	}
	runtime.KeepAlive(streams)
	return total, end.Sub(t0).Seconds(), producersSecs
}

// w2Space is W2's key space, ns/name-0 … ns/name-9999; --scale leaves it alone.
const w2Space = 10_000

// w2Streams draws the four producers' streams of W2 and W2m (250,000 keys each, SplitMix64 seeded
// 1000 + p) and counts the distinct keys they hold (10,000 at full scale).
func (b bench[T]) w2Streams() ([][]T, int) {
	keys := b.keys("ns/name-", w2Space)
	per := b.count(250_000)
	drawn := make([]bool, w2Space)
	distinct := 0
	streams := make([][]T, 4)
	for p := range streams {
		r := splitMix64{uint64(1000 + p)}
		streams[p] = make([]T, per)
		for j := range streams[p] {
			i := r.next() % w2Space
			if !drawn[i] {
				drawn[i] = true
				distinct++
			}
			streams[p][j] = keys[i]
		}
	}
	return streams, distinct
}

// w2Extra is the "extra" W2 and W2m share.
func w2Extra(adds, items int, producersSecs float64) []field {
	return []field{
		{"adds", adds},
		{"adds_per_sec", jsonNumber(float64(adds) / producersSecs)},
		{"dedup_ratio", jsonNumber(float64(adds) / float64(items))},
		{"producers_secs", producersSecs},
	}
}

// W2: 4 producers × 250,000 adds drawn from 10,000 keys with no consumer running, then 4 consumers
// drain; every key comes out exactly once (checked: 10,000 items, or the distinct keys drawn under
// --scale).
func (b bench[T]) w2() (outcome, error) {
	streams, distinct := b.w2Streams()
	if b.scale == 0 && distinct != w2Space {
		return outcome{}, fmt.Errorf("W2 draws cover %d keys, expected %d", distinct, w2Space)
	}
	adds := 4 * len(streams[0])
	items, secs, producersSecs := b.drain(streams, 4, afterProducers)
	if items != distinct {
		return outcome{}, fmt.Errorf("W2 handed out %d keys, expected each of %d exactly once", items, distinct)
	}
	return outcome{workload: "W2", items: items, secs: secs, extra: w2Extra(adds, items, producersSecs)}, nil
}

// W2m: the old mixed W2, the same adds while 4 consumers get → done; items is however many the
// queue coalesced into (no check).
func (b bench[T]) w2m() (outcome, error) {
	streams, _ := b.w2Streams()
	adds := 4 * len(streams[0])
	items, secs, producersSecs := b.drain(streams, 4, withProducers)
	return outcome{workload: "W2m", items: items, secs: secs, extra: w2Extra(adds, items, producersSecs)}, nil
}

// W3: 8 producers × 125,000 unique keys each, 8 consumers; every key processed once (checked).
func (b bench[T]) w3() (outcome, error) {
	per := b.count(125_000)
	streams := make([][]T, 8)
	for p := range streams {
		streams[p] = b.keys(fmt.Sprintf("ns/p%d-", p), per)
	}
	items, secs, producersSecs := b.drain(streams, 8, withProducers)
	if items != 8*per {
		return outcome{}, fmt.Errorf("W3 processed %d keys, expected %d", items, 8*per)
	}
	return outcome{workload: "W3", items: items, secs: secs, extra: []field{
		{"producers_secs", producersSecs},
	}}, nil
}

// W4: main AddAfter's every key with a uniform delay in [0, 1 s] (seed 2000); one consumer notes
// when each comes out; lateness = that time − due time, nearest-rank percentiles.
func (b bench[T]) w4() (outcome, error) {
	n := b.count(100_000)
	keys := b.keys("ns/name-", n)
	r := splitMix64{2000}
	delays := make([]time.Duration, n)
	for i := range delays {
		delays[i] = time.Duration(r.next() % 1_000_000_001)
	}
	due := make([]time.Duration, n)  // since the clock start; written by main
	came := make([]time.Duration, n) // since the clock start; written by the consumer
	q := workqueue.NewTypedDelayingQueue[T]()
	g := newGate(1)

	var lastGet time.Duration
	var failure error
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t0 := g.enter()
		for j := range n {
			item, shutdown := q.Get()
			if shutdown {
				failure = fmt.Errorf("W4 queue shut down after %d gets", j)
				return
			}
			now := time.Since(t0)
			key := b.name(item)
			i, err := strconv.Atoi(key[strings.LastIndexByte(key, '-')+1:])
			if err != nil || i < 0 || i >= n {
				failure = fmt.Errorf("W4 bad key %q", key)
				return
			}
			came[i], lastGet = now, now
			q.Done(item)
		}
	}()

	t0 := g.start()
	for i, k := range keys {
		due[i] = time.Since(t0) + delays[i]
		q.AddAfter(k, delays[i])
	}
	<-finished
	q.ShutDown()
	runtime.KeepAlive(keys)
	if failure != nil {
		return outcome{}, failure
	}

	late := make([]float64, n) // ms
	sum := 0.0
	for i := range late {
		late[i] = float64(came[i]-due[i]) / 1e6
		sum += late[i]
	}
	sort.Float64s(late)
	rank := func(pct int) float64 { return late[max(0, (pct*n+99)/100-1)] } // index ⌈p·n⌉−1
	return outcome{workload: "W4", items: n, secs: lastGet.Seconds(), extra: []field{
		{"p50_ms", rank(50)},
		{"p99_ms", rank(99)},
		{"max_ms", late[n-1]},
		{"min_ms", late[0]},
		{"mean_ms", sum / float64(n)},
	}}, nil
}

// W5: 100,000 keys (since 2026-11-28) each fail five times (per-item exponential backoff from 1 µs,
// capped at 1 s, no token bucket), then succeed; the consumer whose success is the last one stops
// the clock. Checked: 600,000 gets and 100,000 successes.
func (b bench[T]) w5() (outcome, error) {
	n := b.count(100_000)
	keys := b.keys("ns/name-", n)
	const base = time.Microsecond
	q := workqueue.NewTypedRateLimitingQueue[T](workqueue.NewTypedItemExponentialFailureRateLimiter[T](base, time.Second))
	const consumers = 4
	g := newGate(consumers)

	var successes atomic.Int64
	var end time.Time // written by the consumer whose success is the n-th
	gets := make([]int, consumers)
	var consumed sync.WaitGroup
	for c := range consumers {
		consumed.Go(func() {
			g.enter()
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				gets[c]++
				if q.NumRequeues(item) < 5 {
					q.AddRateLimited(item) // a failure
					q.Done(item)
					continue
				}
				q.Forget(item) // the 6th attempt succeeds
				q.Done(item)
				if successes.Add(1) == int64(n) {
					end = time.Now()
					q.ShutDown()
				}
			}
		})
	}

	t0 := g.start()
	for _, k := range keys {
		q.Add(k)
	}
	consumed.Wait()
	runtime.KeepAlive(keys)

	total := 0
	for _, x := range gets {
		total += x
	}
	if end.IsZero() {
		return outcome{}, fmt.Errorf("W5 never reached success %d", n)
	}
	if total != 6*n {
		return outcome{}, fmt.Errorf("W5 made %d gets, expected %d", total, 6*n)
	}
	if got := successes.Load(); got != int64(n) {
		return outcome{}, fmt.Errorf("W5 counted %d successes, expected %d", got, n)
	}
	return outcome{workload: "W5", items: total, secs: end.Sub(t0).Seconds(), extra: []field{
		{"successes", successes.Load()},
		{"base", "1us"},
		{"base_ns", base.Nanoseconds()},
	}}, nil
}

func (b bench[T]) workload(name string) (func() (outcome, error), bool) {
	run, ok := map[string]func() (outcome, error){
		"W1": b.w1, "W2": b.w2, "W2m": b.w2m, "W3": b.w3, "W4": b.w4, "W5": b.w5,
	}[name]
	return run, ok
}

func main() {
	if err := vectorsOK(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "SplitMix64 test vectors: ok")

	flags := flag.NewFlagSet(os.Args[0], flag.ContinueOnError)
	workload := flags.String("workload", "", "W1, W2, W2m, W3, W4 or W5")
	items := flags.String("items", "string", "queue item type: string (the Typed queues) or any (the untyped API)")
	scale := flags.Float64("scale", 0, "multiply every count by this factor (smoke tests only)")
	if err := flags.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	scaleSet := false
	flags.Visit(func(f *flag.Flag) { scaleSet = scaleSet || f.Name == "scale" })
	if flags.NArg() != 0 || *workload == "" || (scaleSet && !(*scale > 0 && !math.IsInf(*scale, 0))) {
		fmt.Fprintln(os.Stderr, "usage: client-go-v0.37-workqueue --workload W1..W5|W2m [--items string|any] [--scale F>0]")
		os.Exit(2)
	}

	var impl string
	var run func() (outcome, error)
	var ok bool
	switch *items {
	case "string":
		impl = "client-go-v0.37.2"
		run, ok = bench[string]{scale: *scale, key: func(s string) string { return s }, name: func(s string) string { return s }}.workload(*workload)
	case "any":
		// Each key is boxed into an interface value here, before any clock starts, as the v1.20
		// peer does: handing it to the queue in a timed region then copies no string header.
		impl = "client-go-v0.37.2-any"
		run, ok = bench[any]{scale: *scale, key: func(s string) any { return s }, name: func(v any) string { return v.(string) }}.workload(*workload)
	default:
		fmt.Fprintf(os.Stderr, "--items %q: string or any\n", *items)
		os.Exit(2)
	}
	if !ok {
		if regexp.MustCompile(`^W[0-9]+[a-z]*$`).MatchString(*workload) {
			fmt.Fprintf(os.Stderr, "%s cannot run %s\n", impl, *workload)
			os.Exit(3)
		}
		fmt.Fprintf(os.Stderr, "unknown workload %q (want W1..W5 or W2m)\n", *workload)
		os.Exit(2)
	}

	fmt.Fprintf(os.Stderr, "%s %s (%s, GOMAXPROCS=%d)\n", impl, *workload, runtime.Version(), runtime.GOMAXPROCS(0))
	res, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if scaleSet {
		res.extra = append(res.extra, field{"scale", *scale})
	}
	fmt.Println(res.line(impl))
}
