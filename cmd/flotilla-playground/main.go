// Command flotilla-playground runs flotilla on your machine with nothing
// installed but Go: an in-process etcd and kube-apiserver, flotilla-scheduler,
// a demo cluster of fake nodes (CPU-only and 8-GPU) and the workloads in
// manifests/examples, which arrive in waves and contend for it. It writes
// a kubeconfig so kubectl (or another scheduler, with --no-scheduler) can
// talk to it, prints where every pod landed, and serves until Ctrl-C.
//
// Run it with `go run` (make playground): the apiserver finds its serving
// certificates through its source path, which a -trimpath build removes.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/klog/v2"

	"github.com/flotilla-sched/flotilla/internal/cluster"
	"github.com/flotilla-sched/flotilla/manifests"
)

func main() {
	var (
		kubeconfig    = flag.String("kubeconfig", "playground.kubeconfig", "where to write the kubeconfig for kubectl or another scheduler")
		configFile    = flag.String("config", "", "KubeSchedulerConfiguration to run (default: the shipped manifests/scheduler-config.yaml)")
		noScheduler   = flag.Bool("no-scheduler", false, "start only the control plane and demo nodes, so another scheduler can be pointed at the kubeconfig")
		exitAfter     = flag.Bool("exit-after-settle", false, "print the summary and exit once scheduling has settled")
		settleTimeout = flag.Duration("settle-timeout", 2*time.Minute, "how long to wait for scheduling to settle")
		logFile       = flag.String("log", "playground.log", "where the control plane's and scheduler's logs go ('-' for stderr)")
		nativeGangs   = flag.Bool("native-gangs", false, "run with Kubernetes' native PodGroups on (the GenericWorkload gate and scheduling.k8s.io/v1beta1), and apply manifests/examples/native too")
	)
	flag.Parse()
	if err := run(*kubeconfig, *configFile, *noScheduler, *exitAfter, *settleTimeout, *logFile, *nativeGangs); err != nil {
		fmt.Fprintln(os.Stderr, "playground:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, configFile string, noScheduler, exitAfterSettle bool, settleTimeout time.Duration, logFile string, nativeGangs bool) error {
	logs, closeLogs, err := openLog(logFile)
	if err != nil {
		return err
	}
	defer closeLogs()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	tb := cluster.NewProcessTB("flotilla-playground", logs)
	defer tb.Close()

	kubeconfig, err = filepath.Abs(kubeconfig)
	if err != nil {
		return err
	}
	fmt.Println("Starting the control plane (etcd + kube-apiserver + kube-controller-manager) and simulated kubelets ...")
	apiserverFlags, schedulerOptions, examples := cluster.RealisticAPIServerFlags, cluster.SchedulerOptions{}, []string(nil)
	if nativeGangs {
		// The gate also turns on in this process's scheduler and
		// controllers: the test apiserver sets it process-wide.
		apiserverFlags = append(slices.Clone(apiserverFlags), cluster.NativeGroupsAPIServerFlags...)
		schedulerOptions.Flags = []string{"--feature-gates=GenericWorkload=true"}
		examples = []string{"examples/native"}
	}
	cp, err := cluster.StartControlPlane(ctx, tb, cluster.ControlPlaneOptions{KubeconfigPath: kubeconfig, ExtraAPIServerFlags: apiserverFlags})
	if err != nil {
		return err
	}
	if err := cp.StartControllers(ctx, tb); err != nil {
		return err
	}
	if err := cp.StartKubelets(ctx, tb, cluster.KubeletOptions{Log: logs}); err != nil {
		return err
	}
	if err := cp.CreateNodes(ctx, demoNodes()...); err != nil {
		return err
	}
	if err := cp.PublishDevices(ctx, draNode, draNodeDevices); err != nil {
		return err
	}
	fmt.Printf("Control plane up with %d demo nodes.\n  kubectl --kubeconfig %s get nodes,pods -A\n", len(demoNodes()), kubeconfig)

	if noScheduler {
		fmt.Println("No scheduler started (--no-scheduler): point one at the kubeconfig. Ctrl-C to stop.")
		<-ctx.Done()
		return nil
	}

	config, err := schedulerConfig(configFile)
	if err != nil {
		return err
	}
	scheduler, err := cp.StartScheduler(ctx, config, schedulerOptions)
	if err != nil {
		return fmt.Errorf("starting flotilla-scheduler: %w", err)
	}
	// The scheduler's watches must end before the apiserver shuts down, or
	// the apiserver waits out its graceful-shutdown timeout for them.
	defer scheduler.Stop()
	fmt.Println("flotilla-scheduler running. Applying manifests/examples, in waves ...")
	// The examples arrive in waves (cluster.ApplyAfterAnnotation) and hold
	// more work than the demo cluster: a status line every two seconds
	// shows Jobs come and go, a gang wait with its reason, a queue
	// reclaim its share and the shares settle.
	start := time.Now()
	applied := make(chan error, 1)
	go func() {
		_, err := cluster.ApplyExamples(ctx, cp, func(after time.Duration, objs []*unstructured.Unstructured) {
			if after > 0 {
				fmt.Printf("t=%3.0fs  a new wave arrives: %s\n", time.Since(start).Seconds(), objectNames(objs))
			}
		}, examples...)
		applied <- err
	}()
	w := &watcher{cp: cp, start: start, kubeconfig: kubeconfig}
	if err := w.waitForJobs(ctx, os.Stdout, applied, settleTimeout); err != nil {
		return err
	}
	pods, err := cp.WaitForSettled(ctx, cluster.FlotillaSchedulerName, 2*time.Second, settleTimeout)
	if err != nil {
		return err
	}
	if err := printSummary(ctx, os.Stdout, cp, pods); err != nil {
		return err
	}
	w.printWaited(os.Stdout)
	if exitAfterSettle {
		return nil
	}
	fmt.Printf("\nWhy something waits, the queues, the pending gangs (make kubectl-flotilla puts the plugin in bin/):\n"+
		"  PATH=$PWD/bin:$PATH kubectl flotilla --kubeconfig %[1]s queues\n"+
		"  PATH=$PWD/bin:$PATH kubectl flotilla --kubeconfig %[1]s pending -A\n"+
		"  PATH=$PWD/bin:$PATH kubectl flotilla --kubeconfig %[1]s why job NAME -n NAMESPACE\n", kubeconfig)
	fmt.Println("\nServing until Ctrl-C; a status line every 10 s.")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(10 * time.Second):
			if line, err := w.statusLine(ctx); err == nil {
				fmt.Println(line)
			}
		}
	}
}

func openLog(path string) (io.Writer, func(), error) {
	if path == "-" {
		return os.Stderr, func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	// The apiserver logs through klog's global logger; keep all of it, errors
	// included, off the terminal so the summary stays readable.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	for name, value := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := fs.Set(name, value); err != nil {
			f.Close()
			return nil, nil, err
		}
	}
	klog.SetOutput(f)
	return f, func() { klog.Flush(); f.Close() }, nil
}

func schedulerConfig(path string) ([]byte, error) {
	if path == "" {
		return manifests.File("scheduler-config.yaml")
	}
	return os.ReadFile(path)
}

// demoNodes is a small heterogeneous cluster: CPU-only nodes, 8-GPU nodes
// (device plugin) and an 8-GPU node whose GPUs come through DRA.
func demoNodes() []cluster.NodeSpec {
	gpu := map[corev1.ResourceName]string{cluster.GPU: "8"}
	return []cluster.NodeSpec{
		{Name: "cpu-1", CPU: "8", Memory: "32Gi", Labels: cluster.TopologyLabels("zone-a", "rack-1", "")},
		{Name: "cpu-2", CPU: "8", Memory: "32Gi", Labels: cluster.TopologyLabels("zone-a", "rack-1", "")},
		{Name: "cpu-3", CPU: "16", Memory: "64Gi", Labels: cluster.TopologyLabels("zone-a", "rack-2", "")},
		{Name: "gpu-1", CPU: "32", Memory: "256Gi", Extended: gpu, Labels: cluster.TopologyLabels("zone-a", "rack-3", "fabric-1.1")},
		{Name: "gpu-2", CPU: "32", Memory: "256Gi", Extended: gpu, Labels: cluster.TopologyLabels("zone-a", "rack-3", "fabric-1.2")},
		// GPUs through DRA: none in allocatable, 8 devices in a
		// ResourceSlice (draNodeDevices).
		{Name: draNode, CPU: "32", Memory: "256Gi", Labels: cluster.TopologyLabels("zone-a", "rack-4", "")},
	}
}

// draNode publishes its GPUs through DRA, as a driver's kubelet plugin
// would: manifests/examples/dra-training.yaml asks for them.
const draNode, draNodeDevices = "dra-gpu-1", 8
