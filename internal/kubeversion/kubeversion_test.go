package kubeversion

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	cases := map[string]struct {
		in      string
		want    Minor
		patch   int
		wantErr bool
	}{
		"plain":       {in: "v1.34.4", want: Minor{1, 34}, patch: 4},
		"vendor":      {in: "v1.35.4-eks-abc", want: Minor{1, 35}, patch: 4},
		"pre-release": {in: "v1.37.0-rc.1", want: Minor{1, 37}},
		"build":       {in: "v1.36.3+k3s1", want: Minor{1, 36}, patch: 3},
		"no v":        {in: "1.35.4", wantErr: true},
		"two parts":   {in: "v1.35", wantErr: true},
		"words":       {in: "unknown", wantErr: true},
		"empty":       {in: "", wantErr: true},
		"not numbers": {in: "v1.x.4", wantErr: true},
	}
	for name, c := range cases {
		got, err := Parse(c.in)
		if c.wantErr {
			if err == nil {
				t.Errorf("%s: Parse(%q) = %+v, want an error", name, c.in, got)
			}
			continue
		}
		if err != nil || got.Minor != c.want || got.Patch != c.patch || got.GitVersion != c.in {
			t.Errorf("%s: Parse(%q) = %+v, %v; want %v patch %d", name, c.in, got, err, c.want, c.patch)
		}
	}
}

// TestCheck: the host takes 1.35 to 1.37, a member 1.34 to 1.37; the
// message names the version and the range.
func TestCheck(t *testing.T) {
	cases := map[string]struct {
		role      Role
		version   string
		known     bool
		supported bool
		message   []string
		advice    string
	}{
		"host oldest":          {role: Host, version: "v1.35.0", known: true, supported: true},
		"host newest":          {role: Host, version: "v1.37.2", known: true, supported: true},
		"host managed":         {role: Host, version: "v1.36.1-gke.1200", known: true, supported: true},
		"host too old":         {role: Host, version: "v1.34.4", known: true, message: []string{"v1.34.4", "older than the oldest supported host version, 1.35", "1.35–1.37"}, advice: "upgrade the host to Kubernetes 1.35 or newer"},
		"host too new":         {role: Host, version: "v1.38.0", known: true, message: []string{"v1.38.0", "newer than the newest supported host version, 1.37"}, advice: "upgrade flotilla to a release that supports Kubernetes 1.38"},
		"member one older":     {role: Member, version: "v1.34.4", known: true, supported: true},
		"member too old":       {role: Member, version: "v1.33.2", known: true, message: []string{"Kubernetes v1.33.2 is older than the oldest supported member version, 1.34", "1.34–1.37"}, advice: "upgrade the member to Kubernetes 1.34 or newer"},
		"member too new":       {role: Member, version: "v1.38.1-eks-1", known: true, message: []string{"v1.38.1-eks-1", "newest supported member version, 1.37"}, advice: "upgrade flotilla to a release that supports Kubernetes 1.38"},
		"member other major":   {role: Member, version: "v2.0.0", known: true, advice: "upgrade flotilla to a release that supports Kubernetes 2.0"},
		"member not read":      {role: Member, version: "", message: []string{"not known"}},
		"member not a version": {role: Member, version: "weird", message: []string{`"weird"`, "1.34–1.37"}},
	}
	for name, c := range cases {
		v := Check(c.role, c.version)
		if v.Known != c.known || v.Supported != c.supported || v.Role != c.role || v.Version != c.version {
			t.Errorf("%s: Check(%s, %q) = %+v, want known %v supported %v", name, c.role, c.version, v, c.known, c.supported)
		}
		if v.Advice != c.advice {
			t.Errorf("%s: advice %q, want %q", name, v.Advice, c.advice)
		}
		for _, m := range c.message {
			if !strings.Contains(v.Message, m) {
				t.Errorf("%s: message %q, want it to say %q", name, v.Message, m)
			}
		}
	}
}

// TestSupported: the ranges the docs state.
func TestSupported(t *testing.T) {
	if got := Supported(Host).String(); got != "1.35–1.37" {
		t.Errorf("host range %s", got)
	}
	if got := Supported(Member).String(); got != "1.34–1.37" {
		t.Errorf("member range %s", got)
	}
}
