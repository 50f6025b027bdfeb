package webhookcert

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Config says what a Rotator keeps.
type Config struct {
	// Client reaches the cluster holding the Secret and the webhook
	// configurations.
	Client kubernetes.Interface
	// Secret holds the CA and serving certificate; created when missing.
	Secret types.NamespacedName
	// Want is what the certificates must be.
	Want Want
	// MutatingWebhookConfigurations and ValidatingWebhookConfigurations
	// name the configurations whose webhooks all get the CA bundle.
	MutatingWebhookConfigurations, ValidatingWebhookConfigurations []string
	// Interval is the longest time between two reads of the Secret, which
	// is how soon a replica serves what another replica renewed.
	Interval time.Duration
	// Clock defaults to the real one.
	Clock clock.WithTicker
	// Log defaults to logrus's standard logger.
	Log logrus.FieldLogger
}

// Rotator keeps the certificates of Config and serves the current serving
// certificate through GetCertificate. Every replica runs one: they agree
// through the Secret's resourceVersion, so one of them writes a renewal and
// the others read it.
type Rotator struct {
	cfg      Config
	serving  atomic.Pointer[tls.Certificate]
	injected atomic.Bool
	certPEM  []byte // the serving certificate in use, to load it only on change
	bundle   []byte // the CA bundle last written into every configuration
}

// New checks cfg and returns a Rotator for it.
func New(cfg Config) (*Rotator, error) {
	if cfg.Client == nil || cfg.Secret.Name == "" || cfg.Secret.Namespace == "" {
		return nil, errors.New("webhookcert: a client and the Secret's namespace and name are required")
	}
	if len(cfg.Want.DNSNames) == 0 && len(cfg.Want.IPs) == 0 {
		return nil, errors.New("webhookcert: the serving certificate needs a DNS name or an IP address")
	}
	if cfg.Want.CAValidity <= 0 || cfg.Want.ServingValidity <= 0 {
		return nil, errors.New("webhookcert: validities must be positive")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 30 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Log == nil {
		cfg.Log = logrus.StandardLogger()
	}
	cfg.Log = cfg.Log.WithField("secret", cfg.Secret.String())
	return &Rotator{cfg: cfg}, nil
}

// GetCertificate returns the current serving certificate, for
// tls.Config.GetCertificate.
func (r *Rotator) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := r.serving.Load(); c != nil {
		return c, nil
	}
	return nil, errors.New("webhook serving certificate not loaded yet")
}

// ReadyCheck fails until the serving certificate is loaded and the CA
// bundle is in every webhook configuration, for a manager's readyz.
func (r *Rotator) ReadyCheck(*http.Request) error {
	switch {
	case r.serving.Load() == nil:
		return errors.New("serving certificate not loaded")
	case !r.injected.Load():
		return errors.New("CA bundle not yet in the webhook configurations")
	}
	return nil
}

// NeedLeaderElection is false: every replica serves webhooks, so every
// replica needs the certificate.
func (r *Rotator) NeedLeaderElection() bool { return false }

// Start keeps the certificates until ctx ends.
func (r *Rotator) Start(ctx context.Context) error {
	backoff := time.Second
	for {
		next, err := r.sync(ctx)
		wait := r.cfg.Interval
		if err != nil {
			r.cfg.Log.WithError(err).Warn("webhook certificate sync failed")
			wait, backoff = backoff, min(2*backoff, r.cfg.Interval)
		} else {
			backoff = time.Second
			if d := next.Sub(r.cfg.Clock.Now()); d < wait {
				wait = max(d, time.Second)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-r.cfg.Clock.After(wait):
		}
	}
}

// sync renews what is due, loads the serving certificate and writes the CA
// bundle into the webhook configurations. It returns when to look again.
func (r *Rotator) sync(ctx context.Context) (time.Time, error) {
	secrets := r.cfg.Client.CoreV1().Secrets(r.cfg.Secret.Namespace)
	var data map[string][]byte
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		s, err := secrets.Get(ctx, r.cfg.Secret.Name, metav1.GetOptions{})
		found := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("get Secret: %w", err)
		}
		var current map[string][]byte
		if found {
			current = s.Data
		}
		renewed, reasons, err := Renew(r.cfg.Clock.Now(), current, r.cfg.Want)
		if err != nil {
			return err
		}
		data = renewed
		if len(reasons) == 0 {
			return nil
		}
		if !found {
			s = &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: r.cfg.Secret.Name, Namespace: r.cfg.Secret.Namespace,
					Labels: map[string]string{"app.kubernetes.io/component": "webhook-certificate"}},
				Type: corev1.SecretTypeTLS, Data: renewed,
			}
			if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
				if apierrors.IsAlreadyExists(err) {
					// Another replica was first: read its Secret.
					return apierrors.NewConflict(corev1.Resource("secrets"), s.Name, err)
				}
				return fmt.Errorf("create Secret: %w", err)
			}
		} else {
			s.Data = renewed
			if _, err := secrets.Update(ctx, s, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		r.cfg.Log.WithField("reasons", reasons).Info("webhook certificates renewed")
		return nil
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("renew webhook certificates: %w", err)
	}
	if !bytes.Equal(data[ServingCertKey], r.certPEM) {
		c, err := tls.X509KeyPair(data[ServingCertKey], data[ServingKeyKey])
		if err != nil {
			return time.Time{}, fmt.Errorf("load serving certificate: %w", err)
		}
		r.serving.Store(&c)
		r.certPEM = data[ServingCertKey]
		r.cfg.Log.WithField("notAfter", c.Leaf.NotAfter).Info("webhook serving certificate loaded")
	}
	// Written again on every sync, not only on change: a `helm upgrade` or
	// a user may have reset a caBundle.
	if err := r.inject(ctx, data[CABundleKey]); err != nil {
		r.injected.Store(false)
		return time.Time{}, err
	}
	if !bytes.Equal(r.bundle, data[CABundleKey]) {
		r.cfg.Log.WithField("configurations", len(r.cfg.MutatingWebhookConfigurations)+len(r.cfg.ValidatingWebhookConfigurations)).Info("webhook CA bundle written")
		r.bundle = data[CABundleKey]
	}
	r.injected.Store(true)
	return NextCheck(r.cfg.Clock.Now(), data), nil
}

// inject sets the caBundle of every webhook of the configured
// configurations to bundle, updating a configuration only when one differs.
func (r *Rotator) inject(ctx context.Context, bundle []byte) error {
	ar := r.cfg.Client.AdmissionregistrationV1()
	m, v := ar.MutatingWebhookConfigurations(), ar.ValidatingWebhookConfigurations()
	if err := injectInto(ctx, "MutatingWebhookConfiguration", r.cfg.MutatingWebhookConfigurations, bundle, m.Get, m.Update,
		func(c *admissionregistrationv1.MutatingWebhookConfiguration) (out []*admissionregistrationv1.WebhookClientConfig) {
			for i := range c.Webhooks {
				out = append(out, &c.Webhooks[i].ClientConfig)
			}
			return out
		}); err != nil {
		return err
	}
	return injectInto(ctx, "ValidatingWebhookConfiguration", r.cfg.ValidatingWebhookConfigurations, bundle, v.Get, v.Update,
		func(c *admissionregistrationv1.ValidatingWebhookConfiguration) (out []*admissionregistrationv1.WebhookClientConfig) {
			for i := range c.Webhooks {
				out = append(out, &c.Webhooks[i].ClientConfig)
			}
			return out
		})
}

// injectInto sets bundle in the client configs of each named webhook
// configuration of one kind, read with get and written with update.
func injectInto[T any](ctx context.Context, kind string, names []string, bundle []byte,
	get func(context.Context, string, metav1.GetOptions) (T, error),
	update func(context.Context, T, metav1.UpdateOptions) (T, error),
	clientConfigs func(T) []*admissionregistrationv1.WebhookClientConfig) error {
	for _, name := range names {
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			c, err := get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			changed := false
			for _, cc := range clientConfigs(c) {
				if !bytes.Equal(cc.CABundle, bundle) {
					cc.CABundle, changed = bundle, true
				}
			}
			if !changed {
				return nil
			}
			_, err = update(ctx, c, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return fmt.Errorf("CA bundle of %s %s: %w", kind, name, err)
		}
	}
	return nil
}

var (
	_ manager.Runnable               = (*Rotator)(nil)
	_ manager.LeaderElectionRunnable = (*Rotator)(nil)
)
