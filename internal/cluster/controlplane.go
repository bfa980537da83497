package cluster

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	"k8s.io/kubernetes/test/utils/ktesting"
	podgroupclient "sigs.k8s.io/scheduler-plugins/pkg/generated/clientset/versioned"

	"github.com/flotilla-sched/flotilla/manifests"
)

// apiServerFlags are what a kubelet-less cluster needs: without a kubelet no
// node would ever lose the not-ready taint, and no ServiceAccount controller
// runs to create the default accounts pods would be admitted against.
//
// The stream limit is what one process holding every component needs. The
// controller-manager, the KWOK kubelets and the test's own clients share one
// client-go transport, so one HTTP/2 connection carries all their watches;
// the apiserver's default of 100 streams per connection puts that connection
// at its limit, where Go's server can count a just-finished stream a moment
// after the client has reused its slot and resets the new stream with
// PROTOCOL_ERROR (a test's request failed so, about once in five make
// test runs). Separate processes, as in a real cluster,
// each hold a connection of their own far below the limit.
var apiServerFlags = []string{
	"--disable-admission-plugins=ServiceAccount,TaintNodesByCondition",
	"--http2-max-streams-per-connection=1000",
}

// ControlPlane is a running etcd + kube-apiserver pair with the flotilla CRDs
// installed.
type ControlPlane struct {
	// Config is an admin client config; KubeconfigPath holds the same
	// credentials for out-of-process clients (kubectl, another scheduler).
	Config         *rest.Config
	KubeconfigPath string
	Clients

	tb ktesting.TB
}

// ControlPlaneOptions tune StartControlPlane.
type ControlPlaneOptions struct {
	// KubeconfigPath is where to write the admin kubeconfig; default a file
	// in a temporary directory removed at clean-up.
	KubeconfigPath string
	// ExtraAPIServerFlags are appended to the apiserver's flags.
	ExtraAPIServerFlags []string
	// NoCRDs leaves the CRDs out, for a test that installs them its own
	// way (the Helm chart).
	NoCRDs bool
}

// StartControlPlane starts embedded etcd and kube-apiserver, installs the
// CRDs from manifests/crds (unless opts.NoCRDs), and registers their shutdown with tb.Cleanup.
func StartControlPlane(ctx context.Context, tb ktesting.TB, opts ControlPlaneOptions) (*ControlPlane, error) {
	etcdURL, err := startEtcd(tb)
	if err != nil {
		return nil, fmt.Errorf("starting etcd: %w", err)
	}
	storage := storagebackend.NewDefaultConfig("/registry", nil)
	storage.Transport.ServerList = []string{etcdURL}
	flags := append(append([]string{}, apiServerFlags...), opts.ExtraAPIServerFlags...)
	server, err := kubeapiservertesting.StartTestServer(tb, nil, flags, storage)
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver: %w", err)
	}
	tb.Cleanup(server.TearDownFn)

	cfg := unthrottled(server.ClientConfig)
	cp := &ControlPlane{Config: cfg, tb: tb}
	if cp.Clients, err = NewClients(cfg); err != nil {
		return nil, err
	}
	cp.KubeconfigPath = opts.KubeconfigPath
	if cp.KubeconfigPath == "" {
		cp.KubeconfigPath = filepath.Join(tb.TempDir(), "kubeconfig")
	}
	if err := WriteKubeconfig(cfg, cp.KubeconfigPath); err != nil {
		return nil, err
	}
	if opts.NoCRDs {
		return cp, nil
	}
	if err := cp.InstallCRDs(ctx); err != nil {
		return nil, err
	}
	return cp, nil
}

// Clients are the API clients of one identity.
type Clients struct {
	Client    kubernetes.Interface
	PodGroups podgroupclient.Interface
	Dynamic   dynamic.Interface
}

// NewClients builds the clients of cfg without client-side rate limiting.
func NewClients(cfg *rest.Config) (Clients, error) {
	cfg = unthrottled(cfg)
	var c Clients
	var err error
	if c.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		return c, err
	}
	// The PodGroup CRD speaks JSON only.
	jsonCfg := rest.CopyConfig(cfg)
	jsonCfg.ContentType, jsonCfg.AcceptContentTypes = "application/json", "application/json"
	if c.PodGroups, err = podgroupclient.NewForConfig(jsonCfg); err != nil {
		return c, err
	}
	c.Dynamic, err = dynamic.NewForConfig(cfg)
	return c, err
}

// unthrottled copies cfg without its default 5 qps, which would make the
// test client, not the scheduler, the bottleneck of every scenario and
// workload.
func unthrottled(cfg *rest.Config) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 5000, 10000
	return cfg
}

// startEtcd runs an in-process etcd on free loopback ports and returns its
// client URL. Its data lives in a temporary directory removed at clean-up.
func startEtcd(tb ktesting.TB) (string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return "", err
	}
	cfg := embed.NewConfig()
	cfg.Dir = tb.TempDir()
	// A throw-away single-member cluster: durability buys nothing here.
	cfg.UnsafeNoFsync = true
	clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
	peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return "", err
	}
	tb.Cleanup(func() {
		e.Close()
		<-e.Server.StopNotify()
	})
	select {
	case <-e.Server.ReadyNotify():
	case <-time.After(60 * time.Second):
		e.Server.Stop()
		return "", fmt.Errorf("etcd did not become ready within 60s")
	}
	return clientURL.String(), nil
}

// FreePort returns a local TCP port that was free a moment ago.
func FreePort() (int, error) {
	ports, err := freePorts(1)
	if err != nil {
		return 0, err
	}
	return ports[0], nil
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// WriteKubeconfig writes cfg as a kubeconfig file. The TLS server name is
// kept: the test apiserver's certificate is issued for it, not for the IP.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["flotilla"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.TLSClientConfig.CAData,
		TLSServerName:            cfg.TLSClientConfig.ServerName,
	}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{
		Token:                 cfg.BearerToken,
		ClientCertificateData: cfg.TLSClientConfig.CertData,
		ClientKeyData:         cfg.TLSClientConfig.KeyData,
	}
	kc.Contexts["flotilla"] = &clientcmdapi.Context{Cluster: "flotilla", AuthInfo: "admin"}
	kc.CurrentContext = "flotilla"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}

// InstallCRDs creates every CRD in manifests/crds and waits until the
// apiserver serves them.
func (cp *ControlPlane) InstallCRDs(ctx context.Context) error {
	return InstallCRDs(ctx, cp.Config)
}

// InstallCRDs creates every CRD in manifests/crds in the cluster the config
// reaches (those that exist are left as they are) and waits until the
// apiserver serves them.
func InstallCRDs(ctx context.Context, config *rest.Config) error {
	crds, err := manifests.CRDs()
	if err != nil {
		return err
	}
	client, err := apiextensionsclient.NewForConfig(config)
	if err != nil {
		return err
	}
	return installCRDs(ctx, client, crds)
}
