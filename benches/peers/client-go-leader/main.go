// Command client-go-leader is the client-go side of ferrokube's leader-election benchmark
// (examples/src/bin/bench_leader.rs, protocol in benches/peers/LEADER.md): one candidate for a Lease,
// elected with client-go v1.20's tools/leaderelection and a resourcelock.LeaseLock, as vendored in
// the Kubernetes 1.20.2 source tree (built by scripts/build-client-go-leader.sh).
//
//	client-go-leader --kubeconfig FILE --namespace NS --name LEASE --identity ID \
//	    [--lease-duration 15s] [--renew-deadline 10s] [--retry-period 2s]
//
// (-flag works too; durations are Go durations.) ReleaseOnCancel is on: SIGTERM or SIGINT cancels
// the election's context, so a leader gives the Lease up (holder "", duration 1 s) before the
// process exits with status 0. A second signal exits at once with status 130. Losing the Lease
// without a signal (renewal failed for --renew-deadline) exits with status 1, as a controller
// would.
//
// stdout carries one JSON line per event, nothing else; unix_nanos is this machine's wall clock
// when the callback ran:
//
//	{"event":"started_leading","identity":ID,"unix_nanos":N}
//	{"event":"stopped_leading","identity":ID,"unix_nanos":N}   (only after started_leading)
//	{"event":"new_leader","identity":ID,"leader":HOLDER,"unix_nanos":N}
//
// new_leader is client-go's OnNewLeader: the first holder this candidate observes, and every change
// after that (including "" when a leader released the Lease). klog writes to stderr.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"
)

// eventLine is one line of the stdout protocol.
type eventLine struct {
	Event     string  `json:"event"`
	Identity  string  `json:"identity"`
	Leader    *string `json:"leader,omitempty"`
	UnixNanos int64   `json:"unix_nanos"`
}

// emitter writes event lines; callbacks run on goroutines of their own, so writes are serialised.
type emitter struct {
	mu       sync.Mutex
	identity string
	out      *json.Encoder
}

func (e *emitter) emit(event string, leader *string) {
	now := time.Now().UnixNano()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.out.Encode(eventLine{Event: event, Identity: e.identity, Leader: leader, UnixNanos: now}); err != nil {
		fmt.Fprintf(os.Stderr, "client-go-leader: writing stdout: %v\n", err)
	}
}

func main() {
	// wait.Jitter (the followers' 2–4.4 s between tries) draws from math/rand's global source,
	// which Go 1.19 seeds with 1: unseeded, every candidate process would draw the same delays.
	// kube-controller-manager, kube-scheduler and kube-apiserver seed it first thing; so do we.
	rand.Seed(time.Now().UnixNano())
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default $KUBECONFIG)")
	namespace := flag.String("namespace", "default", "namespace of the Lease")
	name := flag.String("name", "", "name of the Lease")
	identity := flag.String("identity", "", "this candidate's holder identity")
	leaseDuration := flag.Duration("lease-duration", 15*time.Second, "LeaseDuration")
	renewDeadline := flag.Duration("renew-deadline", 10*time.Second, "RenewDeadline")
	retryPeriod := flag.Duration("retry-period", 2*time.Second, "RetryPeriod")
	flag.Parse()
	if *name == "" || *identity == "" {
		fmt.Fprintln(os.Stderr, "client-go-leader: --name and --identity are required")
		os.Exit(2)
	}

	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: *kubeconfig},
		&clientcmd.ConfigOverrides{},
	).ClientConfig()
	if err != nil {
		fmt.Fprintf(os.Stderr, "client-go-leader: kubeconfig: %v\n", err)
		os.Exit(2)
	}
	// client-go's defaults otherwise (QPS 5, burst 10, HTTP/2).
	config.UserAgent = "client-go-leader/" + *identity
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "client-go-leader: client: %v\n", err)
		os.Exit(2)
	}

	out := &emitter{identity: *identity, out: json.NewEncoder(os.Stdout)}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: *namespace, Name: *name},
		Client:     clientset.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: *identity},
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	cancelled := make(chan struct{})
	go func() {
		<-signals
		close(cancelled)
		cancel()
		<-signals
		os.Exit(130)
	}()

	var leading bool
	var leadingMu sync.Mutex
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   *leaseDuration,
		RenewDeadline:   *renewDeadline,
		RetryPeriod:     *retryPeriod,
		ReleaseOnCancel: true,
		Name:            *name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				leadingMu.Lock()
				leading = true
				leadingMu.Unlock()
				out.emit("started_leading", nil)
			},
			// Run calls this whenever it returns, leader or not; the protocol reports only the end
			// of a leadership.
			OnStoppedLeading: func() {
				leadingMu.Lock()
				was := leading
				leading = false
				leadingMu.Unlock()
				if was {
					out.emit("stopped_leading", nil)
				}
			},
			OnNewLeader: func(holder string) {
				out.emit("new_leader", &holder)
			},
		},
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "client-go-leader: %v\n", err)
		os.Exit(2)
	}

	// Run returns after the context is cancelled (having released the Lease if it held it) or
	// after this candidate lost the Lease.
	elector.Run(ctx)
	select {
	case <-cancelled:
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, "client-go-leader: leadership lost")
		os.Exit(1)
	}
}
