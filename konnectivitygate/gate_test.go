package konnectivitygate

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// connectMethod is the agent's one call on the server's agent port.
const connectMethod = "/agent.AgentService/Connect"

// fakeServer stands for konnectivity-server's agent port: it accepts only
// the gate's client certificate, records the identifiers of every stream
// it is sent, answers with a header, echoes each message, and ends the
// stream with a trailer and a status once the agent closes its side.
type fakeServer struct {
	mu      sync.Mutex
	claimed []string
}

func (f *fakeServer) handle(_ any, stream grpc.ServerStream) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	f.mu.Lock()
	f.claimed = append(f.claimed, strings.Join(md.Get(IdentifiersHeader), ","))
	f.mu.Unlock()
	if err := stream.SendHeader(metadata.Pairs("serverid", "upstream")); err != nil {
		return err
	}
	for {
		in := &wrapperspb.StringValue{}
		err := stream.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if err := stream.SendMsg(wrapperspb.String("echo " + in.Value)); err != nil {
			return err
		}
	}
	stream.SetTrailer(metadata.Pairs("done", "yes"))
	return status.Error(codes.Aborted, "stream over")
}

func (f *fakeServer) streams() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.claimed)
}

// rig is a gate between agents and a fakeServer, over real mutual TLS on
// both sides: the agents' CA for agents, a CA of the gate's own toward the
// server.
type rig struct {
	gate     string // the gate's address, where agents dial
	agentsCA *testCA
	server   *fakeServer
	stop     func() // stops the server, closing its connections
	log      *logtest.Hook
}

func newRig(t *testing.T) *rig {
	t.Helper()
	r := &rig{agentsCA: newTestCA(t, "agents-ca"), server: &fakeServer{}}
	gateCA := newTestCA(t, "gate-ca")

	serverFiles := gateCA.issue(t, "server", leaf{ips: []string{"127.0.0.1"}, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	serverTLS, err := serverFiles.server()
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(serverTLS)), grpc.UnknownServiceHandler(r.server.handle))
	sl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(sl) }()
	t.Cleanup(srv.Stop)
	r.stop = srv.Stop

	r.gate = r.startGate(t, sl.Addr().String(), gateCA.issue(t, "gate", leaf{usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}))
	return r
}

// startGate serves a gate in front of server and returns its address.
func (r *rig) startGate(t *testing.T, server string, clientFiles TLSFiles) string {
	t.Helper()
	logger, hook := logtest.NewNullLogger()
	logger.SetLevel(logrus.DebugLevel)
	r.log = hook
	g, err := New(Config{Server: server, ServerTLS: &clientFiles, Log: logrus.NewEntry(logger)})
	if err != nil {
		t.Fatal(err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() {
		served <- g.Serve(t.Context(), gl, new(r.agentsCA.issue(t, "gate-serving", leaf{ips: []string{"127.0.0.1"}, usages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})))
	}()
	t.Cleanup(func() {
		// t.Context is done before cleanups run.
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return gl.Addr().String()
}

// dial connects as an agent whose certificate, of ca, names l. One
// ClientConn is one HTTP/2 connection: its streams share it.
func (r *rig) dial(t *testing.T, ca *testCA, name string, l leaf) *grpc.ClientConn {
	t.Helper()
	l.usages = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	files := ca.issue(t, name, l)
	cert, err := tls.LoadX509KeyPair(files.CertFile, files.KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	pem, err := os.ReadFile(r.agentsCA.file)
	if err != nil || !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("agents' CA: %v", err)
	}
	conn, err := grpc.NewClient(r.gate, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots})))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// connect opens an agent's Connect stream claiming identifiers.
func connect(t *testing.T, conn *grpc.ClientConn, identifiers string) grpc.ClientStream {
	t.Helper()
	ctx := metadata.AppendToOutgoingContext(t.Context(), AgentIDHeader, "agent-1", IdentifiersHeader, identifiers)
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, connectMethod)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// outcome opens a Connect stream claiming identifiers and returns how it
// ends: the error of opening it, or of its first message. A stream let
// through gets no message from the server before it sends one: it ends
// DeadlineExceeded.
func outcome(t *testing.T, conn *grpc.ClientConn, identifiers string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, AgentIDHeader, "agent-1", IdentifiersHeader, identifiers)
	s, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, connectMethod)
	if err != nil {
		return err
	}
	return s.RecvMsg(&wrapperspb.StringValue{})
}

// echo sends msg and waits for the server's echo, the stream staying open
// both ways.
func echo(t *testing.T, s grpc.ClientStream, msg string) {
	t.Helper()
	if err := s.SendMsg(wrapperspb.String(msg)); err != nil {
		t.Fatalf("send %q: %v", msg, err)
	}
	got := &wrapperspb.StringValue{}
	if err := s.RecvMsg(got); err != nil {
		t.Fatalf("receive the echo of %q: %v", msg, err)
	}
	if got.Value != "echo "+msg {
		t.Fatalf("echo of %q: %q", msg, got.Value)
	}
}

// TestGateProxiesANamedClaim: a stream whose claims the agent's
// certificate names reaches the server with its metadata; messages go both
// ways while it stays open, and the server's header, trailer and status
// come back to the agent.
func TestGateProxiesANamedClaim(t *testing.T) {
	r := newRig(t)
	conn := r.dial(t, r.agentsCA, "agent-near", leaf{ips: []string{"10.0.0.5"}})
	s := connect(t, conn, "ipv4=10.0.0.5")
	h, err := s.Header()
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Get("serverid"); !slices.Equal(got, []string{"upstream"}) {
		t.Errorf("server's header serverid: %q", got)
	}
	for _, msg := range []string{"one", "two", "three"} {
		echo(t, s, msg)
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	err = s.RecvMsg(&wrapperspb.StringValue{})
	if st := status.Convert(err); st.Code() != codes.Aborted || st.Message() != "stream over" {
		t.Errorf("the stream ended with %v, want the server's Aborted: stream over", err)
	}
	if got := s.Trailer().Get("done"); !slices.Equal(got, []string{"yes"}) {
		t.Errorf("server's trailer done: %q", got)
	}
	if got := r.server.streams(); !slices.Equal(got, []string{"ipv4=10.0.0.5"}) {
		t.Errorf("the server was sent streams claiming %q", got)
	}
}

// TestGateRefusesAnUnnamedClaim: on a connection that already carries a
// stream let through, a second stream claims an address the certificate
// does not name. It is refused with PermissionDenied naming the identifier
// and the certificate, logged, and never reaches the server; the first
// stream goes on.
func TestGateRefusesAnUnnamedClaim(t *testing.T) {
	r := newRig(t)
	conn := r.dial(t, r.agentsCA, "agent-forger", leaf{ips: []string{"10.0.0.5"}})
	good := connect(t, conn, "ipv4=10.0.0.5")
	echo(t, good, "before")

	err := outcome(t, conn, "ipv4=10.0.0.6")
	st := status.Convert(err)
	if st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "ipv4=10.0.0.6") || !strings.Contains(st.Message(), "CN=agent-forger") {
		t.Errorf("the forged stream ended with %v, want PermissionDenied naming ipv4=10.0.0.6 and CN=agent-forger", err)
	}
	echo(t, good, "after")
	if got := r.server.streams(); !slices.Equal(got, []string{"ipv4=10.0.0.5"}) {
		t.Errorf("the server was sent streams claiming %q, want only the first", got)
	}

	var let, refused *logrus.Entry
	for _, e := range r.log.AllEntries() {
		switch {
		case e.Data["identifier"] == "ipv4=10.0.0.6" && e.Level == logrus.WarnLevel:
			refused = e
		case e.Message == "agent stream let through":
			let = e
		}
	}
	if refused == nil || let == nil {
		t.Fatalf("the gate logged no refusal naming ipv4=10.0.0.6 or no stream let through")
	}
	if refused.Data["remote"] != let.Data["remote"] {
		t.Errorf("the two streams came from %v and %v, want one connection", let.Data["remote"], refused.Data["remote"])
	}
}

// TestGateRefusesAnotherCA: a certificate of another CA, naming the
// address it claims, gets no stream through: the handshake fails.
func TestGateRefusesAnotherCA(t *testing.T) {
	r := newRig(t)
	conn := r.dial(t, newTestCA(t, "other-ca"), "agent-elsewhere", leaf{ips: []string{"10.0.0.5"}})
	if err := outcome(t, conn, "ipv4=10.0.0.5"); status.Code(err) != codes.Unavailable {
		t.Errorf("a stream with another CA's certificate ended with %v, want Unavailable", err)
	}
	if got := r.server.streams(); len(got) != 0 {
		t.Errorf("the server was sent streams claiming %q", got)
	}
}

// TestGateWithoutServer: while the server is down, an agent's stream ends
// Unavailable, as its own dial to the server would, so that it retries.
func TestGateWithoutServer(t *testing.T) {
	r := &rig{agentsCA: newTestCA(t, "agents-ca")}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := l.Addr().String()
	l.Close()
	gateCA := newTestCA(t, "gate-ca")
	r.gate = r.startGate(t, down, gateCA.issue(t, "gate", leaf{usages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}))
	conn := r.dial(t, r.agentsCA, "agent-near", leaf{ips: []string{"10.0.0.5"}})
	err = outcome(t, conn, "ipv4=10.0.0.5")
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "konnectivity-server unreachable") {
		t.Errorf("a stream with the server down ended with %v, want Unavailable", err)
	}
}

// TestGateEndsStreamsWhenTheServerGoes: when the server goes away, the
// agent's stream through the gate ends too, so that the agent dials again
// and finds the server once it is back.
func TestGateEndsStreamsWhenTheServerGoes(t *testing.T) {
	r := newRig(t)
	conn := r.dial(t, r.agentsCA, "agent-near", leaf{ips: []string{"10.0.0.5"}})
	s := connect(t, conn, "ipv4=10.0.0.5")
	echo(t, s, "before")
	r.stop()
	ended := make(chan error, 1)
	go func() { ended <- s.RecvMsg(&wrapperspb.StringValue{}) }()
	select {
	case err := <-ended:
		if err == nil {
			t.Error("the stream went on after the server went away")
		}
		t.Logf("the stream ended: %v", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the stream still open 5s after the server went away")
	}
}
