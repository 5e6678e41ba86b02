// Command client-go-v0.37-informer is the client-go v0.37 side of ferrokube's informer benchmark
// (scripts/bench-informer-peers.sh; protocol in benches/peers/INFORMER.md, followed as the v1.20
// peer in ../../client-go/informer does): read RSS, start a SharedIndexInformer on the Pods of one
// namespace, wait until it has synced, print a "synced" JSON line, then time this round's stamped
// updates from the stamp to the handler and print a "result" JSON line.
//
//	client-go-v0.37-informer --namespace bench --round 3 --updates 2000 [--strip] [--qps 50 --burst 100]
//	    [--watch-list default|true|false]
//
// The informer is built as informer-gen's code for Pods builds it in v0.37
// (k8s.io/client-go/informers/core/v1/pod.go): cache.ToListWatcherWithWatchListSemantics over a
// cache.ListWatch of the clientset, cache.NewSharedIndexInformerWithOptions with the namespace index.
// The only addition is a count of the lists and watches the reflector makes, so that each line says
// how the cache was filled: "lists" (plain LIST requests), "watches", and "streamed" (watches with
// sendInitialEvents=true, i.e. the streaming list).
//
// How the initial list is made is client-go's feature gate WatchListClient (Beta, on by default
// since 1.35: k8s.io/client-go/features/known_features.go). client-go reads it from the environment
// variable KUBE_FEATURE_WatchListClient (true/false) the first time any gate is asked
// (features/envvar.go). --watch-list true/false sets that variable before anything else runs;
// default leaves the environment as it is (so KUBE_FEATURE_WatchListClient=false in the
// environment works too). The effective state is in every JSON line ("watch_list"). With it on, the
// reflector opens one watch with sendInitialEvents=true and resourceVersionMatch=NotOlderThan and
// takes the initial state from its events (the server's watch cache streams it); if the server
// refuses, the reflector falls back to LIST + WATCH by itself, and "lists" shows it.
//
// --strip uses the informer's transform (SetTransform): managedFields and the last-applied
// annotation are dropped before an object is stored, list items and watch events alike.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientfeatures "k8s.io/client-go/features"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const (
	impl           = "client-go-v0.37.2"
	sentAnnotation = "ferrokube.bench/sent"
	lastApplied    = "kubectl.kubernetes.io/last-applied-configuration"
)

// statusKiB reads one "Vm…: N kB" field of /proc/self/status.
func statusKiB(field string) int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(data)) {
		if rest, ok := strings.CutPrefix(line, field); ok {
			parts := strings.Fields(rest)
			if len(parts) > 0 {
				v, _ := strconv.ParseInt(parts[0], 10, 64)
				return v
			}
		}
	}
	return 0
}

// nearestRank is the value at rank ⌈p/100·n⌉ of sorted values.
func nearestRank(sorted []float64, p float64) any {
	if len(sorted) == 0 {
		return nil
	}
	rank := min(max(int(math.Ceil(p/100*float64(len(sorted)))), 1), len(sorted))
	return sorted[rank-1]
}

func emit(fields map[string]any) {
	line, err := json.Marshal(fields)
	if err != nil {
		fmt.Fprintln(os.Stderr, "json:", err)
		os.Exit(1)
	}
	fmt.Println(string(line))
}

func main() {
	namespace := flag.String("namespace", "bench", "namespace of the Pods")
	round := flag.Int("round", 1, "round whose stamps count")
	updates := flag.Int("updates", 2000, "stamped updates to wait for")
	strip := flag.Bool("strip", false, "drop managedFields and last-applied before storing (SetTransform)")
	qps := flag.Float64("qps", 50, "client QPS")
	burst := flag.Int("burst", 100, "client burst")
	watchList := flag.String("watch-list", "default", "WatchListClient: default (the environment, else client-go's default), true or false")
	flag.Parse()

	switch *watchList {
	case "true", "false":
		// Before anything asks a feature gate: client-go reads the environment once.
		os.Setenv("KUBE_FEATURE_WatchListClient", *watchList)
	case "default":
	default:
		fmt.Fprintln(os.Stderr, "--watch-list: default, true or false")
		os.Exit(2)
	}

	started := time.Now()
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	config.QPS = float32(*qps)
	config.Burst = *burst
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
	baseline := statusKiB("VmRSS:")
	streaming := clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient)

	var lists, watches, streamed atomic.Int64
	pods := clientset.CoreV1().Pods(*namespace)
	source := cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			lists.Add(1)
			return pods.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			watches.Add(1)
			if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
				streamed.Add(1)
			}
			return pods.Watch(ctx, opts)
		},
	}, clientset)
	informer := cache.NewSharedIndexInformerWithOptions(source, &corev1.Pod{}, cache.SharedIndexInformerOptions{
		Indexers: cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
	})
	if *strip {
		err := informer.SetTransform(func(obj any) (any, error) {
			if pod, ok := obj.(*corev1.Pod); ok {
				pod.ManagedFields = nil
				delete(pod.Annotations, lastApplied)
			}
			return obj, nil
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, "transform:", err)
			os.Exit(1)
		}
	}

	type sample struct {
		lagMs float64
		at    time.Time
	}
	var mu sync.Mutex
	var samples []sample
	prefix := strconv.Itoa(*round) + ":"
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			now := time.Now()
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			stamp, ok := strings.CutPrefix(pod.Annotations[sentAnnotation], prefix)
			if !ok {
				return
			}
			sent, err := strconv.ParseInt(stamp, 10, 64)
			if err != nil {
				return
			}
			mu.Lock()
			samples = append(samples, sample{float64(now.UnixNano()-sent) / 1e6, now})
			mu.Unlock()
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "handler:", err)
		os.Exit(1)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		fmt.Fprintln(os.Stderr, "never synced")
		os.Exit(1)
	}
	syncMs := float64(time.Since(started).Nanoseconds()) / 1e6
	rss, hwm := statusKiB("VmRSS:"), statusKiB("VmHWM:")
	cached := len(informer.GetStore().ListKeys())
	common := func(event string) map[string]any {
		return map[string]any{
			"event": event, "impl": impl, "pods": cached, "sync_ms": syncMs,
			"baseline_rss_kib": baseline, "rss_kib": rss, "hwm_kib": hwm,
			"watch_list": streaming, "lists": lists.Load(), "watches": watches.Load(), "streamed": streamed.Load(),
		}
	}
	emit(common("synced"))

	deadline := time.Now().Add(180 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(samples)
		mu.Unlock()
		if n >= *updates {
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	mu.Lock()
	got := append([]sample(nil), samples...)
	mu.Unlock()
	lags := make([]float64, len(got))
	for i, s := range got {
		lags[i] = s.lagMs
	}
	sort.Float64s(lags)
	perSec := 0.0
	if len(got) > 1 {
		perSec = float64(len(got)) / got[len(got)-1].at.Sub(got[0].at).Seconds()
	}
	result := common("result")
	result["strip"] = *strip
	result["updates_seen"] = len(got)
	result["lag_p50_ms"] = nearestRank(lags, 50)
	result["lag_p99_ms"] = nearestRank(lags, 99)
	result["updates_per_sec"] = perSec
	emit(result)
}
