package provider

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
)

// A member that answers a WebSocket upgrade with an error (an old kubelet,
// or a proxy that does not pass upgrades) must make exec, attach and
// port-forward retry over SPDY rather than fail.
func TestWebSocketRefusalFallsBackToSPDY(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "upgrade refused", http.StatusBadRequest)
	}))
	t.Cleanup(srv.Close)
	cfg := &rest.Config{Host: srv.URL}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	u, err := url.Parse(srv.URL + "/api/v1/namespaces/ns/pods/p/exec?command=date&stdout=true")
	if err != nil {
		t.Fatal(err)
	}
	ws, err := remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.String())
	if err != nil {
		t.Fatal(err)
	}
	err = ws.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &discard{}})
	if err == nil {
		t.Fatal("exec over WebSocket succeeded against a server that refuses upgrades")
	}
	if !fallBackToSPDY(err) {
		t.Errorf("exec: a refused WebSocket upgrade (%v) does not fall back to SPDY", err)
	}

	pf, err := portforward.NewSPDYOverWebsocketDialer(u, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err = pf.Dial(portforward.PortForwardProtocolV1Name); err == nil {
		t.Fatal("port-forward over WebSocket succeeded against a server that refuses upgrades")
	}
	if !fallBackToSPDY(err) {
		t.Errorf("port-forward: a refused WebSocket upgrade (%v) does not fall back to SPDY", err)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
