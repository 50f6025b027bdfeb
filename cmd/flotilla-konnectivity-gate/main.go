// Command flotilla-konnectivity-gate stands in front of konnectivity-server's
// agent port and lets an agent claim only the identifiers its client
// certificate names (package konnectivitygate): a pull-mode member can then
// no longer claim another member's address. Run it beside the server, which
// listens for agents on loopback only and trusts only the gate's client
// certificate (docs/install.md, "Pull"); the Dockerfile beside this file
// builds its image.
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"

	"flotilla.io/flotilla/internal/logging"
	"flotilla.io/flotilla/konnectivitygate"
)

type options struct {
	listen    string
	agents    konnectivitygate.TLSFiles
	server    string
	serverTLS konnectivitygate.TLSFiles
	logLevel  string
	logFormat string
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "flotilla-konnectivity-gate:", err)
		os.Exit(1)
	}
}

func parseFlags() (*options, error) {
	o := &options{}
	fs := pflag.NewFlagSet("flotilla-konnectivity-gate", pflag.ContinueOnError)
	fs.StringVar(&o.listen, "listen-address", ":8132", "address agents dial: what konnectivity-server's --agent-port was")
	fs.StringVar(&o.agents.CertFile, "tls-cert-file", "", "serving certificate toward agents, of the CA their --ca-cert names (the server's former --cluster-cert)")
	fs.StringVar(&o.agents.KeyFile, "tls-private-key-file", "", "key of --tls-cert-file")
	fs.StringVar(&o.agents.CAFile, "agent-ca-file", "", "CA of the agents' client certificates (the server's former --cluster-ca-cert)")
	fs.StringVar(&o.server, "server-address", "127.0.0.1:8091", "konnectivity-server's agent port, bound to loopback (--agent-bind-address=127.0.0.1)")
	fs.StringVar(&o.serverTLS.CertFile, "server-client-cert-file", "", "the gate's client certificate toward the server, of the CA that is now the server's --cluster-ca-cert")
	fs.StringVar(&o.serverTLS.KeyFile, "server-client-key-file", "", "key of --server-client-cert-file")
	fs.StringVar(&o.serverTLS.CAFile, "server-ca-file", "", "CA of the server's serving certificate (its --cluster-cert)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return nil, err
	}
	for _, f := range []struct{ flag, value string }{
		{"tls-cert-file", o.agents.CertFile}, {"tls-private-key-file", o.agents.KeyFile}, {"agent-ca-file", o.agents.CAFile},
		{"server-client-cert-file", o.serverTLS.CertFile}, {"server-client-key-file", o.serverTLS.KeyFile}, {"server-ca-file", o.serverTLS.CAFile},
	} {
		if f.value == "" {
			return nil, fmt.Errorf("--%s is required", f.flag)
		}
	}
	return o, nil
}

func run() error {
	o, err := parseFlags()
	if err != nil {
		return err
	}
	logger, err := logging.New(o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	log := logrus.NewEntry(logger)
	gate, err := konnectivitygate.New(konnectivitygate.Config{Server: o.server, ServerTLS: &o.serverTLS, Log: log})
	if err != nil {
		return err
	}
	l, err := net.Listen("tcp", o.listen)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log.WithFields(logrus.Fields{"listen": l.Addr().String(), "server": o.server}).Info("flotilla-konnectivity-gate serving agents")
	if err := gate.Serve(ctx, l, &o.agents); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
