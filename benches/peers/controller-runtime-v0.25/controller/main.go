// Command controller-runtime-v0.25-controller is the controller-runtime side of ferrokube's
// controller benchmark (examples/src/bin/bench_controller.rs, implementation "controller-runtime";
// protocol in benches/peers/CONTROLLER.md): a controller-runtime v0.25.2 manager with one
// controller for the Pods of one namespace, whose reconcile does no I/O, driven by the same
// commands on stdin and answering with the same JSON lines on stdout as the kube-rs peer
// (../kube-runtime/src/bin/controller.rs) and ferrokube's side:
//
//	controller-runtime-v0.25-controller --namespace bench --objects 10000 [--concurrency 16]
//	    [--unsafe-disable-deep-copy]
//
//	(start)                        → {"event":"initial", initial_ms, ...}   every object reconciled once
//	phase <id> <timeout_s>         → {"event":"armed"} ... {"event":"phase", lags, rate, ...}
//	spin <id> <warmup_ms> <win_ms> → {"event":"armed"} ... {"event":"spin", reconciles_per_sec}
//	quit                           → {"event":"final", hwm_kib}
//
// Settings (each set explicitly, whatever the default):
//   - the client: rest.Config from KUBECONFIG with QPS -1, no client-side rate limiter. That is
//     also what controller-runtime's own ctrl.GetConfig() gives a user (pkg/client/config/config.go:
//     QPS 0 becomes -1, "rely on server-side priority and fairness"); ferrokube runs with qps None
//     and kube-rs has no limiter, so no side is limited by its client.
//   - the controller (controller.Options via the builder): MaxConcurrentReconciles 16 (--concurrency;
//     ferrokube workers(16), kube-rs concurrency(16)); UsePriorityQueue true (pkg/config/controller.go
//     of v0.25.2: "This flag is enabled by default", set anyway); EnableWarmup true, the warm replicas
//     of v0.22 (starting sources before leadership is won), which the same file documents as a no-op
//     when the controller does not need leader election, as here (no leader election in this
//     benchmark, on any side); SkipNameValidation so that nothing else is registered.
//   - the cache: only the benchmark's namespace (cache.Options.DefaultNamespaces); for Pods a
//     Transform (cache.ByObject) that stamps ferrokube.bench/arrived (unix nanos) on an object that
//     carries the driver's ferrokube.bench/sent stamp. client-go runs an informer's transform when the
//     reflector hands the decoded event to the DeltaFIFO, before the store and the handlers: the
//     point where ferrokube stamps (its informer's transform) and kube-rs (WatchStreamExt::modify).
//     Everything else is the default: the client-go v0.37 informer with WatchListClient on (a
//     streaming initial list where the server offers one), metrics and health probes off (bind
//     address "0"), no leader election.
//
// The reconcile: controller-runtime hands a reconcile a key, not the object, so this one does what
// every controller-runtime reconcile does first, a Get from the manager's cached client (which deep
// copies the cached Pod unless --unsafe-disable-deep-copy sets the cache's UnsafeDisableDeepCopy;
// off by default, as for a user). The clock reading for the lag is taken on entry, before that Get,
// so the lag ends at the reconcile's start on every side. Then it records as the other sides do and
// returns reconcile.Result{} (await a change) or, while a spin command runs,
// reconcile.Result{RequeueAfter: 1ns}: the controller Forgets the key's backoff and adds it back
// with AddOpts{After: 1ns}, the closest to "requeue at once" controller-runtime has (Requeue: true
// would go through the rate limiter's per-item exponential backoff; RequeueAfter 0 means no
// requeue). ferrokube returns Action::requeue(0), kube-rs Action::requeue(Duration::ZERO).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

const (
	impl    = "controller-runtime-v0.25.2"
	sent    = "ferrokube.bench/sent"
	arrived = "ferrokube.bench/arrived"
)

func statusKiB(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			if parts := strings.Fields(rest); len(parts) > 0 {
				v, _ := strconv.ParseInt(parts[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

// percentileMs is the nearest-rank percentile of sorted nanoseconds, in ms (null when empty).
func percentileMs(sorted []int64, p float64) any {
	if len(sorted) == 0 {
		return nil
	}
	rank := min(max(int(math.Ceil(p/100*float64(len(sorted)))), 1), len(sorted))
	return float64(sorted[rank-1]) / 1e6
}

var stdout sync.Mutex

func say(fields map[string]any) {
	line, err := json.Marshal(fields)
	if err != nil {
		fmt.Fprintln(os.Stderr, "json:", err)
		os.Exit(1)
	}
	stdout.Lock()
	defer stdout.Unlock()
	fmt.Println(string(line))
}

// ---------------------------------------------------------------------------------------------
// The recorder: what the kube-rs peer's Recorder and ferrokube's do, step for step.

// phase is the reconciles of the phase being measured: which objects (by the index in their name)
// were reconciled with the phase's stamp, and how long after their write and after its arrival.
type phase struct {
	id         string
	seen       []bool
	distinct   int
	lags       []int64 // reconcile start − sent, ns
	eventLags  []int64 // reconcile start − arrival of the watch event, ns
	firstSent  int64
	firstStart int64
	lastStart  int64
}

func newPhase(id string, objects int) *phase {
	return &phase{
		id: id, seen: make([]bool, objects),
		lags: make([]int64, 0, objects), eventLags: make([]int64, 0, objects),
		firstSent: math.MaxInt64, firstStart: math.MaxInt64,
	}
}

type recorder struct {
	mu       sync.Mutex
	phase    *phase
	total    atomic.Int64 // every reconcile since the start
	complete atomic.Bool  // the phase has all its objects: reconciles no longer take the lock
	spin     atomic.Bool  // reconciles ask to be run again at once
	objects  int
}

// record is called first thing in every reconcile with the time it started; it says whether to
// requeue at once.
func (r *recorder) record(now int64, name, stamp, arrival string) bool {
	r.total.Add(1)
	if !r.complete.Load() {
		index := -1
		if i := strings.LastIndexByte(name, '-'); i >= 0 {
			if n, err := strconv.Atoi(name[i+1:]); err == nil {
				index = n
			}
		}
		stampPhase, sentText, stamped := strings.Cut(stamp, ":")
		sentNs, sentErr := strconv.ParseInt(sentText, 10, 64)
		r.mu.Lock()
		p := r.phase
		if index >= 0 && index < len(p.seen) && (p.id == "*" || (stamped && p.id == stampPhase)) && !p.seen[index] {
			p.seen[index] = true
			p.distinct++
			if stamped && sentErr == nil && p.id != "*" {
				p.lags = append(p.lags, max(0, now-sentNs))
				p.firstSent = min(p.firstSent, sentNs)
				if arrivedNs, err := strconv.ParseInt(arrival, 10, 64); err == nil {
					p.eventLags = append(p.eventLags, max(0, now-arrivedNs))
				}
			}
			p.firstStart = min(p.firstStart, now)
			p.lastStart = now
			if p.distinct == len(p.seen) {
				r.complete.Store(true)
			}
		}
		r.mu.Unlock()
	}
	return r.spin.Load()
}

func (r *recorder) arm(id string) {
	r.mu.Lock()
	r.phase = newPhase(id, r.objects)
	r.mu.Unlock()
	r.complete.Store(false)
}

// waitComplete waits until every object was reconciled in this phase, or timeout.
func (r *recorder) waitComplete(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !r.complete.Load() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(time.Millisecond)
	}
	return true
}

func (r *recorder) summary() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	p := r.phase
	lags, eventLags := slices.Clone(p.lags), slices.Clone(p.eventLags)
	slices.Sort(lags)
	slices.Sort(eventLags)
	sentToLastMs := math.NaN()
	if p.firstSent != math.MaxInt64 {
		sentToLastMs = float64(max(0, p.lastStart-p.firstSent)) / 1e6
	}
	firstToLastMs := 0.0
	if p.firstStart != math.MaxInt64 {
		firstToLastMs = float64(max(0, p.lastStart-p.firstStart)) / 1e6
	}
	finite := func(v float64) any {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return nil
		}
		return v
	}
	return map[string]any{
		"phase": p.id, "reconciled": p.distinct, "lags": len(lags),
		"lag_p50_ms": percentileMs(lags, 50), "lag_p99_ms": percentileMs(lags, 99),
		"lag_max_ms":       percentileMs(lags, 100),
		"event_lags":       len(eventLags),
		"event_lag_p50_ms": percentileMs(eventLags, 50),
		"event_lag_p99_ms": percentileMs(eventLags, 99),
		"event_lag_max_ms": percentileMs(eventLags, 100),
		"sent_to_last_ms":  finite(sentToLastMs), "first_to_last_ms": firstToLastMs,
		"reconciles_per_sec": finite(float64(p.distinct) / (sentToLastMs / 1e3)),
	}
}

// ---------------------------------------------------------------------------------------------
// The controller.

type bench struct {
	reader client.Reader
	rec    *recorder
}

func (b *bench) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	now := time.Now().UnixNano()
	var pod corev1.Pod
	if err := b.reader.Get(ctx, req.NamespacedName, &pod); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if b.rec.record(now, pod.Name, pod.Annotations[sent], pod.Annotations[arrived]) {
		return reconcile.Result{RequeueAfter: time.Nanosecond}, nil
	}
	return reconcile.Result{}, nil
}

// stampArrival is the cache's transform for Pods: it stamps the arrival of a written object.
func stampArrival(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		if _, stamped := pod.Annotations[sent]; stamped {
			pod.Annotations[arrived] = strconv.FormatInt(time.Now().UnixNano(), 10)
		}
	}
	return obj, nil
}

func main() {
	started := time.Now()
	namespace := flag.String("namespace", "bench", "namespace of the Pods")
	objects := flag.Int("objects", 10000, "Pods seeded and watched")
	concurrency := flag.Int("concurrency", 16, "MaxConcurrentReconciles")
	noDeepCopy := flag.Bool("unsafe-disable-deep-copy", false, "cache.Options.UnsafeDisableDeepCopy for Pods (default off, as for a user)")
	flag.Parse()

	log.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	config.QPS = -1 // no client-side rate limiter
	config.Burst = 0

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fmt.Fprintln(os.Stderr, "scheme:", err)
		os.Exit(1)
	}
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		LeaderElection:         false,
		Cache: cache.Options{
			DefaultNamespaces: map[string]cache.Config{*namespace: {}},
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Pod{}: {Transform: stampArrival, UnsafeDisableDeepCopy: ptr.To(*noDeepCopy)},
			},
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}

	rec := &recorder{phase: newPhase("*", *objects), objects: *objects}
	err = ctrl.NewControllerManagedBy(mgr).
		Named("bench").
		For(&corev1.Pod{}).
		WithOptions(controller.Options{
			MaxConcurrentReconciles: *concurrency,
			UsePriorityQueue:        ptr.To(true),
			EnableWarmup:            ptr.To(true),
			SkipNameValidation:      ptr.To(true),
		}).
		Complete(&bench{reader: mgr.GetClient(), rec: rec})
	if err != nil {
		fmt.Fprintln(os.Stderr, "controller:", err)
		os.Exit(1)
	}
	go func() {
		if err := mgr.Start(context.Background()); err != nil {
			fmt.Fprintln(os.Stderr, "manager stopped:", err)
			os.Exit(1)
		}
	}()

	// The commands come from a goroutine reading stdin.
	commands := make(chan string)
	go func() {
		scanner := bufio.NewScanner(os.Stdin)
		for scanner.Scan() {
			commands <- scanner.Text()
		}
		close(commands)
	}()

	complete := rec.waitComplete(300 * time.Second)
	say(map[string]any{"event": "initial", "impl": impl, "complete": complete,
		"initial_ms": float64(time.Since(started).Nanoseconds()) / 1e6,
		"rss_kib":    statusKiB("VmRSS:"), "hwm_kib": statusKiB("VmHWM:"),
		"total_reconciles": rec.total.Load()})

	for line := range commands {
		words := strings.Fields(line)
		switch {
		case len(words) == 3 && words[0] == "phase":
			seconds, err := strconv.Atoi(words[2])
			if err != nil {
				fmt.Fprintf(os.Stderr, "bad timeout in %q\n", line)
				continue
			}
			before := rec.total.Load()
			rec.arm(words[1])
			say(map[string]any{"event": "armed", "phase": words[1]})
			complete := rec.waitComplete(time.Duration(seconds) * time.Second)
			result := rec.summary()
			result["event"] = "phase"
			result["impl"] = impl
			result["complete"] = complete
			result["total_reconciles"] = rec.total.Load() - before
			say(result)
		case len(words) == 4 && words[0] == "spin":
			warmup, err1 := strconv.Atoi(words[2])
			window, err2 := strconv.Atoi(words[3])
			if err1 != nil || err2 != nil {
				fmt.Fprintf(os.Stderr, "bad durations in %q\n", line)
				continue
			}
			rec.spin.Store(true)
			rec.arm(words[1])
			say(map[string]any{"event": "armed", "phase": words[1]})
			complete := rec.waitComplete(120 * time.Second)
			time.Sleep(time.Duration(warmup) * time.Millisecond)
			from, at := rec.total.Load(), time.Now()
			time.Sleep(time.Duration(window) * time.Millisecond)
			counted := rec.total.Load() - from
			seconds := time.Since(at).Seconds()
			rec.spin.Store(false)
			// Let the keys in flight settle before the next command.
			time.Sleep(500 * time.Millisecond)
			say(map[string]any{"event": "spin", "impl": impl, "phase": words[1],
				"complete": complete, "reconciles": counted, "window_s": seconds,
				"reconciles_per_sec": float64(counted) / seconds})
		case len(words) == 1 && words[0] == "quit":
			say(map[string]any{"event": "final", "impl": impl,
				"rss_kib": statusKiB("VmRSS:"), "hwm_kib": statusKiB("VmHWM:"),
				"total_reconciles": rec.total.Load()})
			os.Exit(0)
		default:
			fmt.Fprintf(os.Stderr, "unknown command %q\n", line)
		}
	}
}
