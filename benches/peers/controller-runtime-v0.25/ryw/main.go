// Command controller-runtime-v0.25-ryw is the controller-runtime side of ferrokube's
// read-your-writes benchmark (examples/src/bin/bench_read_your_writes.rs; protocol in
// benches/peers/READ_YOUR_WRITES.md): how long a cached read waits right after the client's own
// write, with controller-runtime v0.25.2's opt-in read-your-writes client, and whether the read
// shows the write.
//
//	controller-runtime-v0.25-ryw --namespace ryw --objects 100 --writes 1000 [--warmup 20]
//	    [--mode ryw|plain] [--max-wait 3s] [--run ID]
//
// The client is a manager's client (mgr.GetClient()), as a controller gets it. With --mode ryw
// (default) the manager is made with
//
//	ctrl.Options{Client: client.Options{Cache: &client.CacheOptions{
//	    EnableReadYourWritesConsistency: ptr.To(true)}}}
//
// which is the API of v0.25.2 as read in the module's source, sigs.k8s.io/controller-runtime@v0.25.2
// pkg/client/client.go (CacheOptions.EnableReadYourWritesConsistency: "read requests against the
// cache will block until the cache observed all write requests that started before the read
// request"; experimental, off by default) and pkg/client/consistency.go (consistentClient: a write
// records the resourceVersion the server answered for that key, a Get waits, under its context,
// until an event handler on the informer has seen a resourceVersion at least that high). With
// --mode plain the option is left off: the default cached client, which does not wait.
//
// Protocol (the ferrokube side, `bench_read_your_writes --role ferrokube`, does the same):
//  1. Start: client from KUBECONFIG, QPS -1 (no client-side limiter, as ctrl.GetConfig() gives);
//     a cache of the Pods of --namespace only; wait until it has synced; print
//     {"event":"synced","impl","mode","sync_ms","pods"}.
//  2. --warmup iterations, then --writes measured iterations, one after the other, on
//     pod-00000 … pod-<objects-1> in turn. An iteration: merge-PATCH the annotation
//     ferrokube.bench/ryw = "<run>:<i>" through the client (clock before and after), then at once
//     Get that Pod through the same client from the cache (clock after), under a context with
//     --max-wait; the read is "fresh" if it shows the annotation just written, "stale" if it shows
//     an older one, an error if it failed (a timeout). Figures: write = PATCH round trip; read =
//     from the PATCH's return to the Get's return (the wait plus the cached read itself).
//  3. Print {"event":"result", ..., "writes", "fresh", "stale", "errors", "read_p50_ms",
//     "read_p99_ms", "read_max_ms", "read_mean_ms", "write_p50_ms", "write_p99_ms"} and exit 0.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	impl       = "controller-runtime-v0.25.2"
	annotation = "ferrokube.bench/ryw"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "controller-runtime-v0.25-ryw: "+format+"\n", args...)
	os.Exit(1)
}

func say(fields map[string]any) {
	line, err := json.Marshal(fields)
	if err != nil {
		fail("json: %v", err)
	}
	fmt.Println(string(line))
}

// percentileMs is the nearest-rank percentile of sorted nanoseconds, in ms (null when empty).
func percentileMs(sorted []int64, p float64) any {
	if len(sorted) == 0 {
		return nil
	}
	rank := min(max(int(math.Ceil(p/100*float64(len(sorted)))), 1), len(sorted))
	return float64(sorted[rank-1]) / 1e6
}

func main() {
	started := time.Now()
	namespace := flag.String("namespace", "ryw", "namespace of the Pods")
	objects := flag.Int("objects", 100, "Pods pod-00000 … to write in turn (seeded by the driver)")
	writes := flag.Int("writes", 1000, "measured iterations")
	warmup := flag.Int("warmup", 20, "iterations before the measured ones")
	mode := flag.String("mode", "ryw", "ryw (EnableReadYourWritesConsistency) or plain (the default cached client)")
	maxWait := flag.Duration("max-wait", 3*time.Second, "a read's context timeout")
	run := flag.String("run", "r", "prefix of the written values (distinct per run)")
	flag.Parse()
	if *mode != "ryw" && *mode != "plain" {
		fail("--mode: ryw or plain")
	}
	if *objects < 1 || *writes < 1 || *warmup < 0 {
		fail("--objects and --writes must be positive, --warmup not negative")
	}

	log.SetLogger(logr.FromSlogHandler(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		clientcmd.NewDefaultClientConfigLoadingRules(), &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		fail("kubeconfig: %v", err)
	}
	config.QPS = -1 // no client-side rate limiter
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		fail("scheme: %v", err)
	}
	clientOptions := client.Options{}
	if *mode == "ryw" {
		clientOptions.Cache = &client.CacheOptions{EnableReadYourWritesConsistency: ptr.To(true)}
	}
	mgr, err := ctrl.NewManager(config, ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{*namespace: {}}},
		Client:                 clientOptions,
	})
	if err != nil {
		fail("manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		if err := mgr.Start(ctx); err != nil && !errors.Is(err, context.Canceled) {
			fail("manager stopped: %v", err)
		}
	}()
	// The Pod informer is made on first use; make it now and wait for it, as a controller's For()
	// would before its first reconcile.
	if _, err := mgr.GetCache().GetInformer(ctx, &corev1.Pod{}); err != nil {
		fail("informer: %v", err)
	}
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		fail("cache never synced")
	}
	c := mgr.GetClient()
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(*namespace)); err != nil {
		fail("list: %v", err)
	}
	say(map[string]any{"event": "synced", "impl": impl, "mode": *mode,
		"sync_ms": float64(time.Since(started).Nanoseconds()) / 1e6, "pods": len(pods.Items)})

	var writeNs, readNs []int64
	fresh, stale, failed := 0, 0, 0
	for i := range *warmup + *writes {
		name := fmt.Sprintf("pod-%05d", i%*objects)
		value := fmt.Sprintf("%s:%d", *run, i)
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{annotation: value}}})
		target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: *namespace, Name: name}}

		t0 := time.Now()
		if err := c.Patch(ctx, target, client.RawPatch(types.MergePatchType, patch)); err != nil {
			fail("patch %s: %v", name, err)
		}
		t1 := time.Now()
		readCtx, readCancel := context.WithTimeout(ctx, *maxWait)
		var got corev1.Pod
		err := c.Get(readCtx, types.NamespacedName{Namespace: *namespace, Name: name}, &got)
		t2 := time.Now()
		readCancel()
		if i < *warmup {
			continue
		}
		writeNs = append(writeNs, t1.Sub(t0).Nanoseconds())
		readNs = append(readNs, t2.Sub(t1).Nanoseconds())
		switch {
		case err != nil:
			failed++
			fmt.Fprintf(os.Stderr, "read %s after write %s: %v\n", name, value, err)
		case got.Annotations[annotation] == value:
			fresh++
		default:
			stale++
		}
	}

	slices.Sort(writeNs)
	var sum int64
	for _, v := range readNs {
		sum += v
	}
	mean := float64(sum) / float64(len(readNs)) / 1e6
	slices.Sort(readNs)
	say(map[string]any{"event": "result", "impl": impl, "mode": *mode,
		"writes": len(readNs), "fresh": fresh, "stale": stale, "errors": failed,
		"read_p50_ms": percentileMs(readNs, 50), "read_p99_ms": percentileMs(readNs, 99),
		"read_max_ms": percentileMs(readNs, 100), "read_mean_ms": mean,
		"write_p50_ms": percentileMs(writeNs, 50), "write_p99_ms": percentileMs(writeNs, 99),
		"max_wait_ms": float64(maxWait.Nanoseconds()) / 1e6})
	cancel()
}
