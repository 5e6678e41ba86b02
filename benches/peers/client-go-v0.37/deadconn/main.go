// The client-go side of the dead-connection drill (tests/e2e/network_faults.rs): a shared
// informer on the ConfigMaps of one namespace, with client-go's defaults (HTTP/2 over TLS, its
// health-check pings, its reflector), that prints one JSON line per thing the drill measures:
//
//	{"event":"synced","unix_ms":...}
//	{"event":"list","unix_ms":...}                 every list the reflector makes (a relist after the first)
//	{"event":"watch","unix_ms":...}                every watch it opens
//	{"event":"added","name":"b","unix_ms":...}     every ConfigMap added to the cache after the sync
//
// The drill freezes the connection under it and measures how long until "added" of an object
// created meanwhile. It runs until its stdin closes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
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

var out sync.Mutex

func emit(fields map[string]any) {
	fields["unix_ms"] = time.Now().UnixMilli()
	line, err := json.Marshal(fields)
	if err != nil {
		return
	}
	out.Lock()
	defer out.Unlock()
	fmt.Println(string(line))
}

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig (its server is the drill's proxy)")
	namespace := flag.String("namespace", "default", "namespace of the ConfigMaps")
	flag.Parse()

	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintln(os.Stderr, "kubeconfig:", err)
		os.Exit(2)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(2)
	}
	configMaps := client.CoreV1().ConfigMaps(*namespace)
	// Counts lists and watches; everything else is client-go's default reflector.
	source := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
			emit(map[string]any{"event": "list"})
			return configMaps.List(ctx, options)
		},
		WatchFuncWithContext: func(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
			emit(map[string]any{"event": "watch"})
			return configMaps.Watch(ctx, options)
		},
	}
	informer := cache.NewSharedIndexInformer(source, &corev1.ConfigMap{}, 0, cache.Indexers{})
	synced := false
	var mu sync.Mutex
	_, err = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			mu.Lock()
			after := synced
			mu.Unlock()
			if cm, ok := obj.(*corev1.ConfigMap); ok && after {
				emit(map[string]any{"event": "added", "name": cm.Name})
			}
		},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "handler:", err)
		os.Exit(2)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced) {
		os.Exit(1)
	}
	mu.Lock()
	synced = true
	mu.Unlock()
	emit(map[string]any{"event": "synced"})
	_, _ = io.Copy(io.Discard, os.Stdin)
	cancel()
}
