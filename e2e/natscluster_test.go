package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/dshq/dshq/bus"
)

// natsCluster is a JetStream cluster of nats-server processes on loopback:
// each node has its own store directory and configuration file, and keeps
// its client, route and monitoring ports across restarts, so that every
// client's server list and every route stays valid. The test owns the
// processes; a cleanup kills whatever still runs.
type natsCluster struct {
	name  string
	nodes []*clusterNode

	mu         sync.Mutex // guards violations
	violations []string   // permissions violations its clients were told of
}

// permissionViolations returns the permissions violations the servers
// reported to the cluster's clients (dialCluster).
func (c *natsCluster) permissionViolations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.violations)
}

// clusterNode is one server of a natsCluster.
type clusterNode struct {
	name     string
	dir      string
	conf     string // the configuration file
	client   int    // client port
	route    int    // route port
	monitor  int    // HTTP monitoring port
	proc     *proc  // the running process (nil while down)
	restarts int
}

// clusterLDM is the lame-duck mode of the cluster's servers. nats-server
// refuses a lame_duck_duration under 30 s; the grace period is the time
// between leaving JetStream and starting to close client connections.
const (
	clusterLDMDuration    = 30 * time.Second
	clusterLDMGracePeriod = time.Second
)

// startNATSCluster starts n clustered nats-server processes with JetStream
// and waits until the JetStream meta group has all n peers, current, and a
// leader. Every node gets its ports up front (a JetStream cluster needs its
// routes configured from the first start) and keeps them across restarts.
func startNATSCluster(t testing.TB, n int) *natsCluster {
	t.Helper()
	c := &natsCluster{name: "dshq-e2e"}
	root := t.TempDir()
	// The ports are the kernel's choice: each is held by a listener until
	// just before its server binds it.
	var held []net.Listener
	reserve := func() int {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, ln)
		return ln.Addr().(*net.TCPAddr).Port
	}
	for i := range n {
		nd := &clusterNode{name: fmt.Sprintf("n%d", i+1), dir: filepath.Join(root, fmt.Sprintf("n%d", i+1))}
		nd.conf = filepath.Join(nd.dir, "nats-server.conf")
		nd.client, nd.route, nd.monitor = reserve(), reserve(), reserve()
		if err := os.MkdirAll(nd.dir, 0o700); err != nil {
			t.Fatal(err)
		}
		c.nodes = append(c.nodes, nd)
	}
	for i, nd := range c.nodes {
		c.writeConf(t, nd)
		for _, ln := range held[3*i : 3*i+3] {
			ln.Close()
		}
		nd.proc = startProc(t, "nats-server "+nd.name, bins.natsServer, []string{"-c", nd.conf}, clusterEnv)
	}
	for _, nd := range c.nodes {
		nd.proc.waitLine(t, startTimeout, "readiness", func(l string) bool { return strings.Contains(l, "Server is ready") })
	}
	c.waitMeta(t, startTimeout)
	c.waitPlacement(t, startTimeout)
	return c
}

// waitPlacement waits until the cluster places a stream on every node: a
// meta group whose peers are all current may still count one offline for
// placement until it has heard from it.
func (c *natsCluster) waitPlacement(t testing.TB, d time.Duration) {
	t.Helper()
	nc := connectCluster(t, c, "e2e-placement-probe", 0)
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	cfg := jetstream.StreamConfig{Name: "E2E_PLACEMENT_PROBE", Subjects: []string{"e2e.placement.probe"},
		Replicas: len(c.nodes), Storage: jetstream.MemoryStorage}
	waitFor(t, d, "a stream placed on every node", func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := js.CreateStream(ctx, cfg)
		return err == nil, err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := js.DeleteStream(ctx, cfg.Name); err != nil {
		t.Fatalf("delete the placement probe: %v", err)
	}
}

// writeConf writes nd's configuration: its ports and routes to every other
// node, lame-duck mode shortened for the test, pings every 2 s, two
// outstanding at most, on client and route connections, so that a server
// that hangs is left within seconds (docs/cluster.md), and the deployment
// example's users and permissions (deploy/nats-server.conf from its first
// tenant block on: the trusted user and the tenants teamA and teamB).
func (c *natsCluster) writeConf(t testing.TB, nd *clusterNode) {
	t.Helper()
	deploy, err := os.ReadFile(deployConfig)
	if err != nil {
		t.Fatal(err)
	}
	at := strings.Index(string(deploy), "\nTENANT_")
	if at < 0 {
		t.Fatalf("%s has no tenant block", deployConfig)
	}
	auth := string(deploy[at:])
	var routes []string
	for _, o := range c.nodes {
		if o != nd {
			routes = append(routes, fmt.Sprintf("%q", fmt.Sprintf("nats-route://127.0.0.1:%d", o.route)))
		}
	}
	conf := fmt.Sprintf(`server_name: %s
host: 127.0.0.1
port: %d
http: "127.0.0.1:%d"
lame_duck_duration: %q
lame_duck_grace_period: %q
ping_interval: "2s"
ping_max: 2
max_payload: 1MB
jetstream {
  store_dir: %q
}
cluster {
  name: %s
  host: 127.0.0.1
  port: %d
  routes: [%s]
}
%s`, nd.name, nd.client, nd.monitor, clusterLDMDuration.String(), clusterLDMGracePeriod.String(),
		filepath.Join(nd.dir, "jetstream"), c.name, nd.route, strings.Join(routes, ", "), auth)
	if err := os.WriteFile(nd.conf, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
}

// urls returns the client URLs of every node, comma-separated (a server
// list for nats.Connect and --nats-url), starting with node first%n.
func (c *natsCluster) urls(first int) string {
	var out []string
	for i := range c.nodes {
		out = append(out, fmt.Sprintf("nats://127.0.0.1:%d", c.nodes[(first+i)%len(c.nodes)].client))
	}
	return strings.Join(out, ",")
}

// node returns the node named name.
func (c *natsCluster) node(t testing.TB, name string) *clusterNode {
	t.Helper()
	for _, nd := range c.nodes {
		if nd.name == name {
			return nd
		}
	}
	t.Fatalf("no cluster node %q", name)
	return nil
}

// kill SIGKILLs nd and waits for the process to be gone.
func (c *natsCluster) kill(t testing.TB, nd *clusterNode) {
	t.Helper()
	nd.proc.kill(t)
	nd.proc = nil
}

// enterLameDuck puts nd in lame-duck mode (SIGUSR2): it hands its Raft
// leaderships to other peers, leaves JetStream, then closes its clients one
// by one and exits.
func (c *natsCluster) enterLameDuck(t testing.TB, nd *clusterNode) {
	t.Helper()
	if err := nd.proc.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
		t.Fatalf("signal %s: %v", nd.proc.name, err)
	}
}

// waitLameDuckExit waits for nd, in lame-duck mode, to exit by itself,
// cleanly.
func (c *natsCluster) waitLameDuckExit(t testing.TB, nd *clusterNode) {
	t.Helper()
	if err := nd.proc.wait(t, clusterLDMDuration+30*time.Second); err != nil {
		t.Fatalf("%s did not exit cleanly after lame-duck mode: %v", nd.proc.name, err)
	}
	nd.proc = nil
}

// restart starts nd again on its store directory and ports and waits until
// its monitoring endpoint reports it healthy: a member of the meta group,
// every stream and consumer replica it holds current.
func (c *natsCluster) restart(t testing.TB, nd *clusterNode, d time.Duration) {
	t.Helper()
	nd.restarts++
	nd.proc = startProc(t, fmt.Sprintf("nats-server %s (restart %d)", nd.name, nd.restarts), bins.natsServer, []string{"-c", nd.conf}, clusterEnv)
	nd.proc.waitLine(t, startTimeout, "readiness", func(l string) bool { return strings.Contains(l, "Server is ready") })
	c.waitHealthy(t, nd, d)
}

// waitHealthy waits until nd's /healthz answers 200.
func (c *natsCluster) waitHealthy(t testing.TB, nd *clusterNode, d time.Duration) {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d/healthz", nd.monitor)
	waitFor(t, d, nd.name+" healthy", func() (bool, error) {
		resp, err := httpGet(url)
		if err != nil {
			return false, err
		}
		if resp.status != http.StatusOK {
			return false, fmt.Errorf("healthz %d: %s", resp.status, resp.body)
		}
		return true, nil
	})
}

// metaInfo is the part of /jsz this test reads.
type metaInfo struct {
	Meta *struct {
		Leader   string `json:"leader"`
		Size     int    `json:"cluster_size"`
		Replicas []struct {
			Name    string `json:"name"`
			Current bool   `json:"current"`
			Offline bool   `json:"offline"`
		} `json:"replicas"`
	} `json:"meta_cluster"`
}

// waitMeta waits until every node sees a meta leader and the meta group has
// every node as a current peer.
func (c *natsCluster) waitMeta(t testing.TB, d time.Duration) {
	t.Helper()
	waitFor(t, d, "the JetStream meta group of every node", func() (bool, error) {
		for _, nd := range c.nodes {
			resp, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/jsz", nd.monitor))
			if err != nil {
				return false, err
			}
			var mi metaInfo
			if err := json.Unmarshal(resp.body, &mi); err != nil {
				return false, fmt.Errorf("%s /jsz: %v", nd.name, err)
			}
			if mi.Meta == nil || mi.Meta.Leader == "" || mi.Meta.Size != len(c.nodes) {
				return false, fmt.Errorf("%s: meta group %s", nd.name, resp.body)
			}
			if mi.Meta.Leader == nd.name {
				if len(mi.Meta.Replicas) != len(c.nodes)-1 {
					return false, fmt.Errorf("%s (meta leader): %d followers", nd.name, len(mi.Meta.Replicas))
				}
				for _, r := range mi.Meta.Replicas {
					if !r.Current || r.Offline {
						return false, fmt.Errorf("meta follower %s not current", r.Name)
					}
				}
			}
		}
		return true, nil
	})
}

type httpResp struct {
	status int
	body   []byte
}

var monitorClient = &http.Client{Timeout: 2 * time.Second}

func httpGet(url string) (httpResp, error) {
	resp, err := monitorClient.Get(url)
	if err != nil {
		return httpResp{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return httpResp{}, err
	}
	return httpResp{status: resp.StatusCode, body: body}, nil
}

// streamCluster returns the cluster part of a stream's info: its leader and
// replicas, as the leader reports them. An error means no leader answered
// within d.
func streamCluster(ctx context.Context, js jetstream.JetStream, stream string, d time.Duration) (*jetstream.ClusterInfo, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info := st.CachedInfo()
	if info.Cluster == nil || info.Cluster.Leader == "" {
		return nil, fmt.Errorf("stream %s has no leader", stream)
	}
	return info.Cluster, nil
}

// waitStreamLeader waits until the stream has a leader other than not and
// returns its name. It asks every 250 ms at most (each request waits that
// long for a leader), so that the time it returns at is the election's,
// within a quarter of a second.
func waitStreamLeader(t testing.TB, js jetstream.JetStream, stream, not string, d time.Duration) string {
	t.Helper()
	var leader string
	waitFor(t, d, fmt.Sprintf("a leader of %s other than %q", stream, not), func() (bool, error) {
		ci, err := streamCluster(context.Background(), js, stream, 250*time.Millisecond)
		if err != nil {
			return false, err
		}
		leader = ci.Leader
		return leader != not, fmt.Errorf("leader is still %s", leader)
	})
	return leader
}

// waitStreamCurrent waits until every replica of the stream is current and
// online, as its leader reports.
func waitStreamCurrent(t testing.TB, js jetstream.JetStream, stream string, replicas int, d time.Duration) {
	t.Helper()
	waitFor(t, d, fmt.Sprintf("every replica of %s current", stream), func() (bool, error) {
		ci, err := streamCluster(context.Background(), js, stream, time.Second)
		if err != nil {
			return false, err
		}
		if len(ci.Replicas) != replicas-1 {
			return false, fmt.Errorf("%s: %d followers, want %d", stream, len(ci.Replicas), replicas-1)
		}
		for _, r := range ci.Replicas {
			if !r.Current || r.Offline {
				return false, fmt.Errorf("%s: replica %s current=%v offline=%v lag=%d", stream, r.Name, r.Current, r.Offline, r.Lag)
			}
		}
		return true, nil
	})
}

// clusterEnv is the cluster's servers' environment: the deployment
// example's passwords.
var clusterEnv = []string{"DSH_TRUSTED_PASSWORD=" + trustedPassword, "DSH_TEAMA_PASSWORD=" + tenantPassword,
	"DSH_TEAMB_PASSWORD=" + tenantPassword}

// connectCluster connects to the cluster as the trusted user, as dshq's
// own processes do (bus.ConnectOptions: it reconnects forever and leaves a
// server that hangs within seconds), trying the servers in order from node
// first; closed at the end of the test.
func connectCluster(t testing.TB, c *natsCluster, name string, first int) *nats.Conn {
	t.Helper()
	return dialCluster(t, c, name, first, nats.UserInfo("trusted", trustedPassword))
}

// connectClusterTenant connects to the cluster as a harness of tenant
// does: its user, its private inbox, bus.ConnectOptions.
func connectClusterTenant(t testing.TB, c *natsCluster, tenant, name string, first int) *nats.Conn {
	t.Helper()
	return dialCluster(t, c, name, first, nats.UserInfo(tenant, tenantPassword), nats.CustomInboxPrefix(bus.TenantInboxPrefix(tenant)))
}

func dialCluster(t testing.TB, c *natsCluster, name string, first int, opts ...nats.Option) *nats.Conn {
	t.Helper()
	// Asynchronous errors (connections reset by a killed server) are
	// expected here; the default handler would print each. A permissions
	// violation is not: it fails the test.
	handler := nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
		if errors.Is(err, nats.ErrPermissionViolation) {
			c.mu.Lock()
			c.violations = append(c.violations, fmt.Sprintf("%s: %v", name, err))
			c.mu.Unlock()
		}
	})
	all := append(bus.ConnectOptions(), nats.Name(name), nats.DontRandomize(), handler)
	all = append(all, opts...)
	nc, err := nats.Connect(c.urls(first), all...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}
