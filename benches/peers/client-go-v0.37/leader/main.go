// Command client-go-v0.37-leader is a client-go v0.37 candidate for ferrokube's leader-election
// benchmark (examples/src/bin/bench_leader.rs, implementation "client-go-v0.37"; protocol in
// benches/peers/LEADER.md): one candidate for a Lease, elected with k8s.io/client-go v0.37.2's
// tools/leaderelection and a resourcelock.LeaseLock, built in module mode (build.sh beside the
// folder). Same flags, lines and exit statuses as the v1.20 candidate (../../client-go-leader):
//
//	client-go-v0.37-leader --kubeconfig FILE --namespace NS --name LEASE --identity ID \
//	    [--lease-duration 15s] [--renew-deadline 10s] [--retry-period 2s]
//
// ReleaseOnCancel is on: SIGTERM or SIGINT cancels the election's context, a leader releases the
// Lease, and the process exits 0 (a second signal: 130 at once). Losing the Lease without a signal
// exits 1. stdout carries one JSON line per event, unix_nanos being this machine's wall clock when
// the callback ran:
//
//	{"event":"started_leading","identity":ID,"unix_nanos":N}
//	{"event":"stopped_leading","identity":ID,"unix_nanos":N}   (only after started_leading)
//	{"event":"new_leader","identity":ID,"leader":HOLDER,"unix_nanos":N}
//
// What differs from the v1.20 candidate, and why:
//   - No rand.Seed: the followers' jitter (wait.Jitter, math/rand's global source) is seeded at
//     random by Go itself since Go 1.20, so every process draws its own delays.
//   - Coordinated is left false (client-go's default): coordinated leader election is a separate
//     protocol (LeaseCandidate objects and a server-side coordinator) that the ferrokube candidate
//     does not speak; the benchmark compares the classic Lease protocol.
//   - Client defaults otherwise, as before: QPS 5, burst 10, protobuf is not asked for (JSON), and
//     HTTP/2 when the server offers it.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
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

// line is one line of the stdout protocol.
type line struct {
	Event     string  `json:"event"`
	Identity  string  `json:"identity"`
	Leader    *string `json:"leader,omitempty"`
	UnixNanos int64   `json:"unix_nanos"`
}

// printer serialises lines: client-go runs the callbacks on goroutines of their own.
type printer struct {
	mu       sync.Mutex
	identity string
	enc      *json.Encoder
}

func (p *printer) say(event string, leader *string) {
	now := time.Now().UnixNano()
	p.mu.Lock()
	defer p.mu.Unlock()
	if err := p.enc.Encode(line{Event: event, Identity: p.identity, Leader: leader, UnixNanos: now}); err != nil {
		fmt.Fprintf(os.Stderr, "client-go-v0.37-leader: stdout: %v\n", err)
	}
}

func fail(status int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "client-go-v0.37-leader: "+format+"\n", args...)
	os.Exit(status)
}

func main() {
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
		fail(2, "--name and --identity are required")
	}

	config, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: *kubeconfig},
		&clientcmd.ConfigOverrides{},
	).ClientConfig()
	if err != nil {
		fail(2, "kubeconfig: %v", err)
	}
	config.UserAgent = "client-go-v0.37-leader/" + *identity
	clientset, err := kubernetes.NewForConfig(config)
	if err != nil {
		fail(2, "client: %v", err)
	}

	out := &printer{identity: *identity, enc: json.NewEncoder(os.Stdout)}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: *namespace, Name: *name},
		Client:     clientset.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: *identity},
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGTERM, syscall.SIGINT)
	signalled := make(chan struct{})
	go func() {
		<-signals
		close(signalled)
		cancel()
		<-signals
		os.Exit(130)
	}()

	var mu sync.Mutex
	leading := false
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   *leaseDuration,
		RenewDeadline:   *renewDeadline,
		RetryPeriod:     *retryPeriod,
		ReleaseOnCancel: true,
		Name:            *name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) {
				mu.Lock()
				leading = true
				mu.Unlock()
				out.say("started_leading", nil)
			},
			// Run calls this whenever it returns; the protocol reports the end of a leadership only.
			OnStoppedLeading: func() {
				mu.Lock()
				was := leading
				leading = false
				mu.Unlock()
				if was {
					out.say("stopped_leading", nil)
				}
			},
			OnNewLeader: func(holder string) {
				out.say("new_leader", &holder)
			},
		},
	})
	if err != nil {
		fail(2, "%v", err)
	}

	// Run returns once the context is cancelled (after releasing the Lease if it held it) or once
	// this candidate lost the Lease.
	elector.Run(ctx)
	select {
	case <-signalled:
		os.Exit(0)
	default:
		fail(1, "leadership lost")
	}
}
