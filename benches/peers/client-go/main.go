// Command ferrokube-wq-peer is the client-go peer of ferrokube's workqueue benchmarks: it runs the
// workloads of benches/WORKLOADS.md (W1–W5 as revised on 2026-11-28, and W2m, the old mixed W2) on
// k8s.io/client-go/util/workqueue as vendored in
// the Kubernetes 1.20.2 source tree, and prints one JSON line per run on stdout.
//
//	ferrokube-wq-peer --workload W3 [--scale 0.1]
//
// (-workload / -scale work too.) Everything except the JSON line goes to stderr. Exit status: 0 ok,
// 1 a run failed its check (W2: every key exactly once, 10,000 items; W3: 1,000,000 items; W5:
// 600,000 gets and 100,000 successes), 2 usage error or SplitMix64 test vectors failed, 3 a workload
// this peer cannot run (a well-formed name other than W1–W5, W2m).
//
// Kept buildable with Go 1.19 (Debian's, see build.sh): no range over an int, no min/max builtins.
//
// It is built in GOPATH mode inside the Kubernetes tree (see build.sh) so that the import below
// resolves to the tree's vendor/. Follow WORKLOADS.md to the letter when changing anything here.
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

// implName is the "impl" field of every JSON line.
const implName = "client-go-v1.20.2"

// ---------------------------------------------------------------------------------------------
// SplitMix64, exactly as WORKLOADS.md defines it (Go's uint64 arithmetic wraps).

type splitMix64 struct{ state uint64 }

func (r *splitMix64) next() uint64 {
	r.state += 0x9e3779b97f4a7c15
	z := r.state
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// checkVectors verifies the test vectors of WORKLOADS.md; the program refuses to run otherwise.
func checkVectors() error {
	want := map[uint64][]uint64{
		1000: {4332104999045480776, 15022492692291828655, 14266957338849687121},
		2000: {13609660699017974483, 883804695291935563, 1885940644450548452},
	}
	for seed, values := range want {
		r := splitMix64{seed}
		for i, w := range values {
			if got := r.next(); got != w {
				return fmt.Errorf("SplitMix64 seed %d draw %d: got %d, want %d", seed, i, got, w)
			}
		}
	}
	r := splitMix64{1003}
	for i, w := range []uint64{1864, 8462, 6476} {
		if got := r.next() % 10000; got != w {
			return fmt.Errorf("SplitMix64 seed 1003 draw %d from 10,000: got %d, want %d", i, got, w)
		}
	}
	return nil
}

// ---------------------------------------------------------------------------------------------
// Inputs and helpers.

// scaled multiplies a count by --scale (rounded, at least 1); without --scale it is unchanged.
func scaled(n int, scale float64) int {
	if scale == 0 {
		return n
	}
	m := int(math.Round(float64(n) * scale))
	if m < 1 {
		m = 1
	}
	return m
}

// makeKeys builds the keys prefix0 … prefix(n-1) before any clock starts. Each key is a Go string
// already stored in an interface{} (the queue's item type), so that handing it to the queue in a
// timed region neither allocates nor copies: converting a string to interface{} would otherwise
// allocate a fresh header on every Add.
func makeKeys(prefix string, n int) []interface{} {
	keys := make([]interface{}, n)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	return keys
}

// startBarrier holds every producer and consumer goroutine until the clock has started.
type startBarrier struct {
	ready sync.WaitGroup // one count per goroutine that must reach the barrier
	gate  chan struct{}  // closed to release them
	t0    time.Time      // the clock start, set before gate is closed
}

func newStartBarrier(parties int) *startBarrier {
	b := &startBarrier{gate: make(chan struct{})}
	b.ready.Add(parties)
	return b
}

// wait is called by each goroutine: it reports arrival, blocks until release, and returns the
// clock start (closing the gate makes the write of t0 visible to every waiter).
func (b *startBarrier) wait() time.Time {
	b.ready.Done()
	<-b.gate
	return b.t0
}

// startClock waits until every goroutine has arrived, starts the clock, then releases them.
func (b *startBarrier) startClock() time.Time {
	b.ready.Wait()
	b.t0 = time.Now()
	close(b.gate)
	return b.t0
}

// result is one run's JSON line. extra keeps insertion order.
type result struct {
	workload string
	items    int
	secs     float64
	extra    []kv
}

type kv struct {
	key   string
	value string // already JSON-encoded
}

// num encodes a float as a JSON number (null if not finite).
func num(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "null"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "null"
	}
	return string(b)
}

func str(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func (r result) jsonLine() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, `{"impl":%s,"workload":%s,"items":%d,"secs":%s,"per_sec":%s,"extra":{`,
		str(implName), str(r.workload), r.items, num(r.secs), num(float64(r.items)/r.secs))
	for i, e := range r.extra {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, "%s:%s", str(e.key), e.value)
	}
	sb.WriteString("}}")
	return sb.String()
}

// ---------------------------------------------------------------------------------------------
// W1 — sequential: one goroutine adds every key, then gets and dones each one.

func w1(scale float64) (result, error) {
	n := scaled(1000000, scale)
	keys := makeKeys("ns/name-", n)
	q := workqueue.New()

	t0 := time.Now()
	for _, k := range keys {
		q.Add(k)
	}
	got := 0
	for i := 0; i < n; i++ {
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
		return result{}, fmt.Errorf("W1 got %d keys, expected %d", got, n)
	}
	return result{workload: "W1", items: got, secs: secs}, nil
}

// ---------------------------------------------------------------------------------------------
// W2, W2m and W3 share one shape: producers each add their own prepared list, consumers get → done
// until shutdown; when all producers have returned, main records producers_secs and shuts down.

// consumersStart says when the consumers begin: with the clock (W2m, W3), or once every producer
// has returned and producers_secs is read (W2 since 2026-11-28, so that adds race no consumer and
// adds/s measures the queue rather than how far the consumers lag).
type consumersStart int

const (
	withProducers consumersStart = iota
	afterProducers
)

// produceAndConsume returns (items handed out by Get, secs to the last Done, producers_secs). Every
// goroutine exists before the clock starts; with afterProducers the consumers wait at a second
// barrier that main releases right after reading producers_secs.
func produceAndConsume(streams [][]interface{}, consumers int, start consumersStart) (int, float64, float64) {
	q := workqueue.New()
	clockParties := len(streams)
	if start == withProducers {
		clockParties += consumers
	}
	b := newStartBarrier(clockParties)
	consumerBarrier := b
	if start == afterProducers {
		consumerBarrier = newStartBarrier(consumers)
	}

	// Consumers: count items and keep the clock reading after their latest Done.
	counts := make([]int, consumers)
	lastDone := make([]time.Time, consumers)
	var consumersDone sync.WaitGroup
	consumersDone.Add(consumers)
	for c := 0; c < consumers; c++ {
		go func(c int) {
			defer consumersDone.Done()
			consumerBarrier.wait()
			items := 0
			var last time.Time
			for {
				item, shutdown := q.Get()
				if shutdown {
					break
				}
				q.Done(item)
				last = time.Now()
				items++
			}
			counts[c], lastDone[c] = items, last
		}(c)
	}

	// Producers: add every key of their own stream, in order.
	var producersDone sync.WaitGroup
	producersDone.Add(len(streams))
	for _, stream := range streams {
		go func(stream []interface{}) {
			defer producersDone.Done()
			b.wait()
			for _, k := range stream {
				q.Add(k)
			}
		}(stream)
	}

	t0 := b.startClock()
	producersDone.Wait()
	producersSecs := time.Since(t0).Seconds()
	if start == afterProducers {
		consumerBarrier.startClock()
	}
	q.ShutDown()
	consumersDone.Wait()

	items := 0
	end := t0
	for c := range counts {
		items += counts[c]
		if lastDone[c].After(end) {
			end = lastDone[c]
		}
	}
	runtime.KeepAlive(streams)
	return items, end.Sub(t0).Seconds(), producersSecs
}

// w2Space is W2's key space, ns/name-0 … ns/name-9999. Under --scale only the adds per producer
// are scaled; the key space stays 10,000 (the draws are defined "from a space of 10,000").
const w2Space = 10000

// w2Streams draws the four producers' streams of W2 and W2m (250,000 keys each, SplitMix64 seeded
// 1000 + p) and counts the distinct keys they hold (10,000 at full scale).
func w2Streams(scale float64) ([][]interface{}, int) {
	keys := makeKeys("ns/name-", w2Space)
	perProducer := scaled(250000, scale)
	drawn := make([]bool, w2Space)
	distinct := 0
	streams := make([][]interface{}, 4)
	for p := range streams {
		r := splitMix64{uint64(1000 + p)}
		streams[p] = make([]interface{}, perProducer)
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
func w2Extra(adds float64, items int, producersSecs float64) []kv {
	return []kv{
		{"adds", num(adds)},
		{"adds_per_sec", num(adds / producersSecs)},
		{"dedup_ratio", num(adds / float64(items))},
		{"producers_secs", num(producersSecs)},
	}
}

// W2 — dedup storm: 4 producers × 250,000 adds drawn from 10,000 keys with no consumer running,
// then 4 consumers drain; every key comes out exactly once (checked: 10,000 items, or the distinct
// keys drawn under --scale).
func w2(scale float64) (result, error) {
	streams, distinct := w2Streams(scale)
	if scale == 0 && distinct != w2Space {
		return result{}, fmt.Errorf("W2 draws cover %d keys, expected %d", distinct, w2Space)
	}
	adds := float64(4 * len(streams[0]))
	items, secs, producersSecs := produceAndConsume(streams, 4, afterProducers)
	if items != distinct {
		return result{}, fmt.Errorf("W2 handed out %d keys, expected each of %d exactly once", items, distinct)
	}
	return result{workload: "W2", items: items, secs: secs, extra: w2Extra(adds, items, producersSecs)}, nil
}

// W2m — the old mixed W2: the same adds while 4 consumers get → done; items is however many the
// queue coalesced into (no check).
func w2m(scale float64) (result, error) {
	streams, _ := w2Streams(scale)
	adds := float64(4 * len(streams[0]))
	items, secs, producersSecs := produceAndConsume(streams, 4, withProducers)
	return result{workload: "W2m", items: items, secs: secs, extra: w2Extra(adds, items, producersSecs)}, nil
}

// W3 — contended: 8 producers × 125,000 unique keys each, 8 consumers; every key processed once.
func w3(scale float64) (result, error) {
	perProducer := scaled(125000, scale)
	streams := make([][]interface{}, 8)
	for p := range streams {
		streams[p] = makeKeys(fmt.Sprintf("ns/p%d-", p), perProducer)
	}
	expected := 8 * perProducer

	items, secs, producersSecs := produceAndConsume(streams, 8, withProducers)
	if items != expected {
		return result{}, fmt.Errorf("W3 processed %d keys, expected %d", items, expected)
	}
	return result{workload: "W3", items: items, secs: secs, extra: []kv{
		{"producers_secs", num(producersSecs)},
	}}, nil
}

// ---------------------------------------------------------------------------------------------
// W4 — delaying: the main goroutine AddAfter's 100,000 keys with uniform delays in [0, 1 s]; one
// consumer records when each key comes out; lateness = that time − due time.

func w4(scale float64) (result, error) {
	n := scaled(100000, scale)
	keys := makeKeys("ns/name-", n)
	r := splitMix64{2000}
	delays := make([]time.Duration, n)
	for i := range delays {
		delays[i] = time.Duration(r.next() % 1000000001) // nanoseconds
	}
	due := make([]time.Duration, n) // due[i], since the clock started; written by main only
	got := make([]time.Duration, n) // when Get returned key i, since the clock started; consumer only
	q := workqueue.NewDelayingQueue()
	b := newStartBarrier(1)

	var lastGet time.Duration
	var consumerErr error
	consumerDone := make(chan struct{})
	go func() {
		defer close(consumerDone)
		t0 := b.wait()
		for j := 0; j < n; j++ {
			item, shutdown := q.Get()
			if shutdown {
				consumerErr = fmt.Errorf("W4 queue shut down after %d gets", j)
				return
			}
			now := time.Since(t0)
			key := item.(string)
			i, err := strconv.Atoi(key[strings.LastIndexByte(key, '-')+1:])
			if err != nil || i < 0 || i >= n {
				consumerErr = fmt.Errorf("W4 bad key %q", key)
				return
			}
			got[i] = now
			lastGet = now
			q.Done(item)
		}
	}()

	// The producer is the main goroutine: due[i] = now + delay[i], then AddAfter.
	t0 := b.startClock()
	for i, k := range keys {
		due[i] = time.Since(t0) + delays[i]
		q.AddAfter(k, delays[i])
	}
	<-consumerDone
	q.ShutDown()
	runtime.KeepAlive(keys)
	if consumerErr != nil {
		return result{}, consumerErr
	}

	lateness := make([]float64, n) // ms
	sum := 0.0
	for i := range lateness {
		lateness[i] = float64(got[i]-due[i]) / 1e6
		sum += lateness[i]
	}
	sort.Float64s(lateness)
	// Nearest rank: the value at index ⌈p·n⌉−1, computed in integers (p in percent).
	rank := func(pct int) float64 {
		idx := (pct*n+99)/100 - 1
		if idx < 0 {
			idx = 0
		}
		return lateness[idx]
	}
	return result{workload: "W4", items: n, secs: lastGet.Seconds(), extra: []kv{
		{"p50_ms", num(rank(50))},
		{"p99_ms", num(rank(99))},
		{"max_ms", num(lateness[n-1])},
		{"min_ms", num(lateness[0])},
		{"mean_ms", num(sum / float64(n))},
	}}, nil
}

// ---------------------------------------------------------------------------------------------
// W5 — rate-limited retry: 100,000 keys (since 2026-11-28) each fail five times (per-item
// exponential backoff from 1 µs, capped at 1 s, no token bucket), then succeed; the consumer with
// the last success stops the clock. Checked: 600,000 gets and 100,000 successes.

func w5(scale float64) (result, error) {
	n := scaled(100000, scale)
	keys := makeKeys("ns/name-", n)
	const base = 1 * time.Microsecond
	q := workqueue.NewRateLimitingQueue(workqueue.NewItemExponentialFailureRateLimiter(base, 1*time.Second))
	const consumers = 4
	b := newStartBarrier(consumers)

	var successes int64
	var end time.Time // written once, by the consumer whose success is the n-th
	gets := make([]int, consumers)
	var consumersDone sync.WaitGroup
	consumersDone.Add(consumers)
	for c := 0; c < consumers; c++ {
		go func(c int) {
			defer consumersDone.Done()
			b.wait()
			for {
				item, shutdown := q.Get()
				if shutdown {
					return
				}
				gets[c]++
				if q.NumRequeues(item) < 5 {
					// A failure: retry after the limiter's backoff.
					q.AddRateLimited(item)
					q.Done(item)
				} else {
					// The 6th attempt succeeds.
					q.Forget(item)
					q.Done(item)
					if atomic.AddInt64(&successes, 1) == int64(n) {
						end = time.Now()
						q.ShutDown()
					}
				}
			}
		}(c)
	}

	t0 := b.startClock()
	for _, k := range keys {
		q.Add(k)
	}
	consumersDone.Wait()
	runtime.KeepAlive(keys)

	total := 0
	for _, g := range gets {
		total += g
	}
	if end.IsZero() {
		return result{}, fmt.Errorf("W5 never reached success %d", n)
	}
	if total != 6*n {
		return result{}, fmt.Errorf("W5 made %d gets, expected %d", total, 6*n)
	}
	if got := atomic.LoadInt64(&successes); got != int64(n) {
		return result{}, fmt.Errorf("W5 counted %d successes, expected %d", got, n)
	}
	return result{workload: "W5", items: total, secs: end.Sub(t0).Seconds(), extra: []kv{
		{"successes", num(float64(atomic.LoadInt64(&successes)))},
		{"base", str("1us")},
		{"base_ns", num(float64(base.Nanoseconds()))},
	}}, nil
}

// ---------------------------------------------------------------------------------------------

var workloads = map[string]func(float64) (result, error){
	"W1": w1, "W2": w2, "W2m": w2m, "W3": w3, "W4": w4, "W5": w5,
}

func main() {
	// Refuse to run at all unless SplitMix64 reproduces the test vectors of WORKLOADS.md.
	if err := checkVectors(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Fprintln(os.Stderr, "SplitMix64 test vectors: ok")

	// The flag package accepts both -workload and --workload (and -scale / --scale).
	fs := flag.NewFlagSet(os.Args[0], flag.ContinueOnError)
	workload := fs.String("workload", "", "workload to run: W1, W2, W2m, W3, W4 or W5")
	scale := fs.Float64("scale", 0, "multiply every count by this factor (smoke tests only)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() != 0 || *workload == "" {
		fmt.Fprintln(os.Stderr, "usage: ferrokube-wq-peer --workload W1..W5|W2m [--scale F]")
		os.Exit(2)
	}
	scaleSet := false
	fs.Visit(func(f *flag.Flag) { scaleSet = scaleSet || f.Name == "scale" })
	if scaleSet && !(*scale > 0 && !math.IsInf(*scale, 0)) {
		fmt.Fprintln(os.Stderr, "--scale must be a positive number")
		os.Exit(2)
	}

	run, ok := workloads[*workload]
	if !ok {
		if regexp.MustCompile(`^W[0-9]+[a-z]*$`).MatchString(*workload) {
			fmt.Fprintf(os.Stderr, "%s cannot run %s\n", implName, *workload)
			os.Exit(3)
		}
		fmt.Fprintf(os.Stderr, "unknown workload %q (want W1..W5 or W2m)\n", *workload)
		os.Exit(2)
	}

	fmt.Fprintf(os.Stderr, "%s %s (%s, GOMAXPROCS=%d)\n", implName, *workload, runtime.Version(), runtime.GOMAXPROCS(0))
	res, err := run(*scale)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if scaleSet {
		res.extra = append(res.extra, kv{"scale", num(*scale)})
	}
	fmt.Println(res.jsonLine())
}
