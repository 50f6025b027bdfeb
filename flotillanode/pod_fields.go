// This file reads what the member's and the host's APIs know of pods,
// so that no pod field is lost in silence between Kubernetes versions
// (package podfields): when the process starts, and again each time the
// member answers after it could not be reached (it may have been
// upgraded meanwhile).

package flotillanode

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/virtual-kubelet/virtual-kubelet/log"

	"flotilla.io/flotilla/clusternode"
	"flotilla.io/flotilla/internal/kube"
	"flotilla.io/flotilla/internal/podfields"
)

// schemaTimeout bounds one read of an API's Pod schema.
const schemaTimeout = 30 * time.Second

// errNoSchema: the client cannot be asked for a schema (a fake clientset).
var errNoSchema = errors.New("the client serves no OpenAPI v3 schema")

// readPodSchema reads the Kubernetes version of the apiserver behind c and
// the pod fields it serves (its OpenAPI v3 document of api/v1).
func readPodSchema(ctx context.Context, c kube.Interface) (string, podfields.Set, error) {
	d := c.Discovery()
	if d == nil || d.RESTClient() == nil {
		return "", nil, errNoSchema
	}
	ctx, cancel := context.WithTimeout(ctx, schemaTimeout)
	defer cancel()
	v, err := d.ServerVersion()
	if err != nil {
		return "", nil, fmt.Errorf("read the version: %w", err)
	}
	// JSON whatever the client's content type: the OpenAPI handler
	// serves no Kubernetes protobuf, and answers 406 to a client that
	// asks only for it.
	doc, err := d.RESTClient().Get().AbsPath("/openapi/v3/api/v1").SetHeader("Accept", "application/json").DoRaw(ctx)
	if err != nil {
		return "", nil, fmt.Errorf("read the OpenAPI v3 schema of api/v1: %w", err)
	}
	served, err := podfields.Served(doc)
	if err != nil {
		return "", nil, err
	}
	return v.GitVersion, served, nil
}

// initPodFields reads what the member's API knows of pods, for the fit
// models and the pod providers, and the host's pod fields that
// flotilla's types do not know. Neither read failing stops the agent: the
// member's is tried again when the versions watch reads its version;
// meanwhile the member's strict field validation still refuses what it
// does not know.
func (s *shared) initPodFields(ctx context.Context) {
	s.fields = &podfields.Member{}
	s.memberBack = make(chan struct{}, 1)
	s.readMemberFields(ctx)
	hostVersion, served, err := readPodSchema(ctx, s.cfg.HostClient)
	switch {
	case errors.Is(err, errNoSchema):
	case err != nil:
		log.G(ctx).WithError(err).Warn("cannot read the host's pod schema: pods are forwarded as flotilla's types read them")
	default:
		// Empty with every host version flotilla supports: it links the
		// newest one's types. A host upgraded past flotilla-node would
		// serve fields decoding drops; those pods are refused instead.
		s.hostOnlyFields = podfields.Missing(served, podfields.Known(), "spec", "metadata")
		// A host older than its member drops the status fields it does
		// not know when flotilla writes a status; they are told of.
		s.hostVersion, s.hostLacks = hostVersion, podfields.Missing(podfields.Known(), served, "status")
		if len(s.hostOnlyFields) > 0 {
			log.G(ctx).WithField("fields", s.hostOnlyFields).Warn("the host serves pod fields flotilla-node's types do not know: pods that set them are refused")
		}
	}
	s.wg.Go(func() { s.rereadMemberFields(ctx) })
}

// readMemberFields reads the member's version and Pod schema into
// s.fields.
func (s *shared) readMemberFields(ctx context.Context) {
	version, served, err := readPodSchema(ctx, s.cfg.MemberClient)
	if errors.Is(err, errNoSchema) {
		return
	}
	if err != nil {
		log.G(ctx).WithError(err).Warn("cannot read the member's pod schema; reading it again when the member answers")
		return
	}
	unknown := podfields.Missing(podfields.Known(), served, "spec", "metadata")
	s.fields.Served(version, unknown)
	// Empty with every member version flotilla supports, as the host's
	// are (initPodFields).
	s.fields.ServesBeyond(podfields.Missing(served, podfields.Known(), "status"))
	log.G(ctx).WithField("version", version).WithField("unknownFields", len(unknown)).Info("read the member's pod schema")
}

// rereadMemberFields reads the member's schema again whenever the
// versions watch sees the member at another version than the schema read
// last (an upgrade, found on a reconnect or by the watch's periodic read),
// or a version while no schema could be read yet, until ctx ends.
func (s *shared) rereadMemberFields(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.memberBack:
			s.readMemberFields(ctx)
		}
	}
}

// memberVersionSeen is the versions watch's sink that asks for the
// member's schema again when its version is not the one the schema was
// read at.
func (s *shared) memberVersionSeen(v clusternode.Versions) {
	if v.Member == "" || v.Member == s.fields.Fields().Version {
		return
	}
	select {
	case s.memberBack <- struct{}{}:
	default:
	}
}
