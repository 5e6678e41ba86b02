// Command client-go-informer-peer is the client-go side of ferrokube's informer benchmark
// (scripts/bench-informer-peers.sh). It follows the protocol of benches/peers/INFORMER.md exactly as
// examples/src/bin/bench_informer.rs does: read RSS, start a SharedIndexInformer on the namespace's
// Pods, wait until synced, print a "synced" JSON line, then time this round's stamped updates from
// the stamp to the handler and print a "result" JSON line.
//
//	client-go-informer-peer --namespace bench --round 3 --updates 2000 [--strip] [--qps 50 --burst 100]
//
// client-go 1.20 has no SetTransform (added in 1.26), so --strip wraps the ListWatch instead: list
// items and watch events lose managedFields and the last-applied annotation before the informer
// stores them, which is what a transform does.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/ioutil"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
)

const sentAnnotation = "ferrokube.bench/sent"

func procStatusKiB(field string) int64 {
	data, err := ioutil.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field) {
			parts := strings.Fields(line)
			if len(parts) >= 2 {
				v, _ := strconv.ParseInt(parts[1], 10, 64)
				return v
			}
		}
	}
	return 0
}

func strip(pod *corev1.Pod) {
	pod.ManagedFields = nil
	delete(pod.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
}

type sample struct {
	lagMs float64
	at    time.Time
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return math.NaN()
	}
	rank := int(math.Ceil(p / 100 * float64(len(sorted))))
	if rank < 1 {
		rank = 1
	}
	if rank > len(sorted) {
		rank = len(sorted)
	}
	return sorted[rank-1]
}

func main() {
	namespace := flag.String("namespace", "bench", "namespace of the Pods")
	round := flag.Int("round", 1, "round whose stamps count")
	updates := flag.Int("updates", 2000, "stamped updates to wait for")
	stripFields := flag.Bool("strip", false, "drop managedFields and last-applied before storing")
	qps := flag.Float64("qps", 50, "client QPS")
	burst := flag.Int("burst", 100, "client burst")
	flag.Parse()

	started := time.Now()
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(1)
	}
	config.QPS = float32(*qps)
	config.Burst = *burst
	clientset := kubernetes.NewForConfigOrDie(config)
	baseline := procStatusKiB("VmRSS:")

	pods := clientset.CoreV1().Pods(*namespace)
	lw := &cache.ListWatch{
		ListFunc: func(options metav1.ListOptions) (runtime.Object, error) {
			list, err := pods.List(context.Background(), options)
			if err == nil && *stripFields {
				for i := range list.Items {
					strip(&list.Items[i])
				}
			}
			return list, err
		},
		WatchFunc: func(options metav1.ListOptions) (watch.Interface, error) {
			w, err := pods.Watch(context.Background(), options)
			if err != nil || !*stripFields {
				return w, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if pod, ok := e.Object.(*corev1.Pod); ok {
					strip(pod)
				}
				return e, true
			}), nil
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})

	var mu sync.Mutex
	var samples []sample
	want := strconv.Itoa(*round) + ":"
	informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj interface{}) {
			now := time.Now()
			pod, ok := obj.(*corev1.Pod)
			if !ok {
				return
			}
			stamp, ok := pod.Annotations[sentAnnotation]
			if !ok || !strings.HasPrefix(stamp, want) {
				return
			}
			sent, err := strconv.ParseInt(strings.TrimPrefix(stamp, want), 10, 64)
			if err != nil {
				return
			}
			lag := float64(now.UnixNano()-sent) / 1e6
			mu.Lock()
			samples = append(samples, sample{lag, now})
			mu.Unlock()
		},
	})
	stop := make(chan struct{})
	go informer.Run(stop)
	if !cache.WaitForCacheSync(stop, informer.HasSynced) {
		fmt.Fprintln(os.Stderr, "never synced")
		os.Exit(1)
	}
	syncMs := float64(time.Since(started).Nanoseconds()) / 1e6
	rss := procStatusKiB("VmRSS:")
	hwm := procStatusKiB("VmHWM:")
	cached := len(informer.GetStore().ListKeys())
	line, _ := json.Marshal(map[string]interface{}{
		"event": "synced", "impl": "client-go-v1.20.2", "pods": cached, "sync_ms": syncMs,
		"baseline_rss_kib": baseline, "rss_kib": rss, "hwm_kib": hwm,
	})
	fmt.Println(string(line))

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
	line, _ = json.Marshal(map[string]interface{}{
		"event": "result", "impl": "client-go-v1.20.2", "strip": *stripFields, "pods": cached,
		"sync_ms": syncMs, "baseline_rss_kib": baseline, "rss_kib": rss, "hwm_kib": hwm,
		"updates_seen": len(got), "lag_p50_ms": percentile(lags, 50), "lag_p99_ms": percentile(lags, 99),
		"updates_per_sec": perSec,
	})
	fmt.Println(string(line))
	close(stop)
}
