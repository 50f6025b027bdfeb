// Package testworld runs real Kubernetes clusters as plain local processes
// for flotilla's end-to-end tests, benchmarks and demo program.
//
// A world is one host cluster plus any number of member clusters. Each
// cluster has its own etcd, kube-apiserver, kube-controller-manager and
// kube-scheduler, its own PKI and admin kubeconfig, and, where it has fake
// nodes, a kwok process that plays the kubelet for them. The binaries come
// from hack/build-testworld.sh (see Binaries), which builds them once into a
// cache.
//
// Everything runs inside a private network namespace (see RunInNetns):
// kube-apiserver refuses to proxy to loopback node addresses, so the fake
// nodes need a non-loopback address (AdvertiseIP), and a private namespace
// gives one without touching the machine's network or sending a packet
// beyond it. Creating the namespace needs root. A program or test binary
// calls RunInNetns first thing in main or TestMain, then Start:
//
//	func TestMain(m *testing.M) { os.Exit(testworld.RunInNetns(m.Run)) }
//
//	w, err := testworld.Start(ctx, testworld.Config{
//		Members: []testworld.ClusterConfig{{Name: "member-1", Nodes: []testworld.NodeSpec{{Name: "node-1"}}}},
//	})
//	...
//	defer w.Stop()
//
// A Site (NewSite) is a second network namespace behind a one-way link, as
// a member behind NAT: its processes reach the world through its gateway,
// and nothing in the world can open a connection to them. It is where a
// pull-mode member lives.
//
// Each cluster keeps its PKI, kubeconfigs, etcd data and one log per
// component in its own directory, World.Dir()/<cluster>; errors about a
// process quote the end of its log.
package testworld
