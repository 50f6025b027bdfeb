package webhookcert

import (
	"crypto/x509"
	"net"
	"slices"
	"testing"
	"time"

	"k8s.io/client-go/util/cert"
)

var (
	t0   = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	day  = 24 * time.Hour
	want = Want{
		DNSNames:        []string{"flotilla-policy-webhook.flotilla-system.svc"},
		IPs:             []net.IP{net.ParseIP("10.0.0.1")},
		CAValidity:      90 * day,
		ServingValidity: 9 * day,
	}
)

func mustRenew(t *testing.T, now time.Time, data map[string][]byte, w Want) (map[string][]byte, []string) {
	t.Helper()
	out, reasons, err := Renew(now, data, w)
	if err != nil {
		t.Fatal(err)
	}
	return out, reasons
}

func first(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	cs, err := cert.ParseCertsPEM(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	return cs[0]
}

// verify checks that a client trusting data's CA bundle accepts the
// serving certificate for every wanted name at now.
func verify(t *testing.T, now time.Time, data map[string][]byte, w Want) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(data[CABundleKey]) {
		t.Fatal("CA bundle holds no certificate")
	}
	leaf := first(t, data[ServingCertKey])
	for _, name := range append(slices.Clone(w.DNSNames), w.IPs[0].String()) {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, CurrentTime: now, DNSName: name}); err != nil {
			t.Fatalf("at %s: serving certificate for %s: %v", now.Sub(t0), name, err)
		}
	}
}

func TestRenewFromNothing(t *testing.T) {
	for name, data := range map[string]map[string][]byte{
		"no Secret":    nil,
		"empty Secret": {},
		"garbage":      {SignerCertKey: []byte("x"), SignerKeyKey: []byte("y"), ServingCertKey: []byte("z")},
		"serving only": {ServingCertKey: []byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")},
		"wrong key": func() map[string][]byte {
			a, _ := mustRenew(t, t0, nil, want)
			b, _ := mustRenew(t, t0, nil, want)
			a[SignerKeyKey] = b[SignerKeyKey]
			return a
		}(),
	} {
		t.Run(name, func(t *testing.T) {
			out, reasons := mustRenew(t, t0, data, want)
			if len(reasons) == 0 {
				t.Fatal("no reasons for a new set")
			}
			verify(t, t0, out, want)
			if _, ok := out[NextCertKey]; ok {
				t.Error("a new set has a next CA")
			}
			if got := first(t, out[ServingCertKey]).NotAfter.Sub(t0); got != want.ServingValidity-skew {
				t.Errorf("serving certificate valid for %s from now, want %s", got, want.ServingValidity-skew)
			}
		})
	}
}

func TestRenewServing(t *testing.T) {
	base, _ := mustRenew(t, t0, nil, want)
	moved := want
	moved.IPs = []net.IP{net.ParseIP("10.0.0.2")}
	for name, tc := range map[string]struct {
		at      time.Duration
		want    Want
		renewed bool
	}{
		"fresh":                   {at: time.Hour, want: want},
		"just before 2/3":         {at: 6*day - skew - time.Minute, want: want},
		"at 2/3 of its life":      {at: 6*day - skew, want: want, renewed: true},
		"expired":                 {at: 10 * day, want: want, renewed: true},
		"other IP":                {at: time.Hour, want: moved, renewed: true},
		"same names, other order": {at: time.Hour, want: Want{DNSNames: want.DNSNames, IPs: want.IPs, CAValidity: want.CAValidity, ServingValidity: want.ServingValidity}},
	} {
		t.Run(name, func(t *testing.T) {
			now := t0.Add(tc.at)
			out, reasons := mustRenew(t, now, base, tc.want)
			renewed := string(out[ServingCertKey]) != string(base[ServingCertKey])
			if renewed != tc.renewed {
				t.Fatalf("renewed = %v (reasons %v), want %v", renewed, reasons, tc.renewed)
			}
			if renewed != (len(reasons) > 0) {
				t.Errorf("renewed = %v with reasons %v", renewed, reasons)
			}
			if string(out[SignerCertKey]) != string(base[SignerCertKey]) {
				t.Error("the signing CA changed")
			}
			verify(t, now, out, tc.want)
		})
	}
}

// TestRenewTimeline runs two CA lifetimes in steps of 6 hours, renewing as a
// replica would, and checks at every step that the serving certificate
// verifies against the bundle, and that a CA signs only after it has been
// in the bundle for 1/6 of a CA's life.
func TestRenewTimeline(t *testing.T) {
	var data map[string][]byte
	trustedSince := map[string]time.Time{} // CA certificate PEM -> when it entered the bundle
	var signerChanges, nextAdded []time.Duration
	prevSigner := ""
	for now := t0; now.Before(t0.Add(2 * want.CAValidity)); now = now.Add(6 * time.Hour) {
		var reasons []string
		data, reasons = mustRenew(t, now, data, want)
		verify(t, now, data, want)
		bundle, err := cert.ParseCertsPEM(data[CABundleKey])
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range bundle {
			pem, _ := cert.EncodeCertificates(c)
			if _, ok := trustedSince[string(pem)]; !ok {
				trustedSince[string(pem)] = now
				if now != t0 {
					nextAdded = append(nextAdded, now.Sub(t0))
				}
			}
		}
		signer := string(data[SignerCertKey])
		if prevSigner != "" && signer != prevSigner {
			signerChanges = append(signerChanges, now.Sub(t0))
			if in := now.Sub(trustedSince[signer]); in < want.CAValidity/6 {
				t.Errorf("at %s: a CA signs after %s in the bundle, want at least %s", now.Sub(t0), in, want.CAValidity/6)
			}
		}
		prevSigner = signer
		// Renewing again at the same instant changes nothing.
		if _, again := mustRenew(t, now, data, want); len(again) > 0 {
			t.Fatalf("at %s: renewed twice (%v, then %v)", now.Sub(t0), reasons, again)
		}
	}
	// CAs of 90 days: the next one is made at 2/3 of the signer's life and
	// signs 15 days later; the second CA was made at 60 days.
	wantAdded := []time.Duration{60 * day, 120 * day}
	wantChanges := []time.Duration{75 * day, 135 * day}
	round := func(ds []time.Duration) []time.Duration {
		out := make([]time.Duration, len(ds))
		for i, d := range ds {
			out[i] = d.Round(day)
		}
		return out
	}
	if got := round(nextAdded); !slices.Equal(got, wantAdded) {
		t.Errorf("next CAs added at %v, want %v", got, wantAdded)
	}
	if got := round(signerChanges); !slices.Equal(got, wantChanges) {
		t.Errorf("signing CA changed at %v, want %v", got, wantChanges)
	}
}

// TestRenewAfterLongOutage: a Secret untouched for longer than the CA's
// life is replaced whole, and one whose signer expired while a next CA
// waited switches to it at once.
func TestRenewAfterLongOutage(t *testing.T) {
	data, _ := mustRenew(t, t0, nil, want)
	now := t0.Add(100 * day)
	out, reasons := mustRenew(t, now, data, want)
	if len(reasons) == 0 || string(out[SignerCertKey]) == string(data[SignerCertKey]) {
		t.Fatalf("expired CA kept (reasons %v)", reasons)
	}
	verify(t, now, out, want)

	withNext, _ := mustRenew(t, t0.Add(61*day), data, want)
	if withNext[NextCertKey] == nil {
		t.Fatal("no next CA at 61 days")
	}
	now = t0.Add(90 * day)
	out, _ = mustRenew(t, now, withNext, want)
	if string(out[SignerCertKey]) != string(withNext[NextCertKey]) {
		t.Error("the next CA did not take over when the signer expired")
	}
	verify(t, now, out, want)
}

func TestNextCheck(t *testing.T) {
	data, _ := mustRenew(t, t0, nil, want)
	if got, want := NextCheck(t0.Add(5*day+12*time.Hour), data), t0.Add(-skew+6*day); !got.Equal(want) {
		t.Errorf("NextCheck = %s, want the serving certificate's 2/3 point %s", got, want)
	}
	long := want
	long.ServingValidity = 30 * day
	data, _ = mustRenew(t, t0, nil, long)
	if got, want := NextCheck(t0, data), t0.Add(day); !got.Equal(want) {
		t.Errorf("NextCheck = %s, want at most a day ahead, %s", got, want)
	}
	now := t0.Add(61 * day)
	data, _ = mustRenew(t, now, data, long)
	if got, want := NextCheck(now.Add(14*day+12*time.Hour), data), t0.Add(76*day); !got.Equal(want) {
		t.Errorf("NextCheck = %s, want the next CA's switch, 15 days after it was made: %s", got, want)
	}
}
