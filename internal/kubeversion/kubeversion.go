// Package kubeversion holds the Kubernetes versions flotilla supports, for
// the host and for members, and decides whether a cluster's version (its
// apiserver's GitVersion) is among them. It is pure: the components read
// the versions and report the verdicts.
package kubeversion

import (
	"fmt"
	"strconv"
	"strings"
)

// Role is the part a cluster plays in the fleet.
type Role string

const (
	// Host is the cluster users apply to, where the virtual nodes live.
	Host Role = "host"
	// Member is a cluster that runs forwarded pods.
	Member Role = "member"
)

// Minor is a Kubernetes minor version, 1.35 say.
type Minor struct{ Major, Minor int }

func (m Minor) String() string { return fmt.Sprintf("%d.%d", m.Major, m.Minor) }

func (m Minor) less(o Minor) bool {
	return m.Major < o.Major || m.Major == o.Major && m.Minor < o.Minor
}

// Range is the minors from Oldest to Newest, both included.
type Range struct{ Oldest, Newest Minor }

func (r Range) String() string { return r.Oldest.String() + "–" + r.Newest.String() }

// Supported returns the range of minors flotilla supports for role: for
// the host the three newest minors Kubernetes serves; for a member those
// and one older, since edge members lag behind.
func Supported(role Role) Range {
	if role == Host {
		return Range{Oldest: Minor{1, 35}, Newest: Minor{1, 37}}
	}
	return Range{Oldest: Minor{1, 34}, Newest: Minor{1, 37}}
}

// Version is a parsed GitVersion: "v1.34.4", "v1.35.4-eks-abc",
// "v1.36.0-rc.1+k3s1".
type Version struct {
	Minor
	Patch int
	// GitVersion is the string it was parsed from.
	GitVersion string
}

// Parse reads a Kubernetes GitVersion, as an apiserver's /version gives
// it; what follows the patch number (a pre-release, a vendor's build) is
// kept in GitVersion only. Managed offerings add "+" to the minor of
// their Major/Minor fields, never to the GitVersion.
func Parse(gitVersion string) (Version, error) {
	s, ok := strings.CutPrefix(strings.TrimSpace(gitVersion), "v")
	if !ok {
		return Version{}, fmt.Errorf("Kubernetes version %q: want v<major>.<minor>.<patch>", gitVersion)
	}
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("Kubernetes version %q: want v<major>.<minor>.<patch>", gitVersion)
	}
	var n [3]int
	for i, p := range parts {
		v, err := strconv.Atoi(p)
		if err != nil || v < 0 {
			return Version{}, fmt.Errorf("Kubernetes version %q: want v<major>.<minor>.<patch>", gitVersion)
		}
		n[i] = v
	}
	return Version{Minor: Minor{n[0], n[1]}, Patch: n[2], GitVersion: gitVersion}, nil
}

// Verdict is whether one cluster's version is supported in its role.
type Verdict struct {
	Role Role
	// Version is the GitVersion judged, empty when it could not be read.
	Version string
	// Known is false when the version could not be read or parsed; the
	// verdict is then neither supported nor not.
	Known     bool
	Supported bool
	// Message says it in words, naming the version and the range.
	Message string
	// Advice, for an unsupported version, says what brings it in range.
	Advice string
}

// Check judges gitVersion, the apiserver's version of a cluster in role;
// an empty gitVersion is one that could not be read.
func Check(role Role, gitVersion string) Verdict {
	r := Supported(role)
	v := Verdict{Role: role, Version: gitVersion}
	if gitVersion == "" {
		v.Message = fmt.Sprintf("the %s's Kubernetes version is not known yet; supported: %s", role, r)
		return v
	}
	parsed, err := Parse(gitVersion)
	if err != nil {
		v.Message = fmt.Sprintf("%v; supported %s versions: %s", err, role, r)
		return v
	}
	v.Known = true
	switch {
	case parsed.Minor.less(r.Oldest):
		v.Message = fmt.Sprintf("Kubernetes %s is older than the oldest supported %s version, %s (supported: %s)", gitVersion, role, r.Oldest, r)
		v.Advice = fmt.Sprintf("upgrade the %s to Kubernetes %s or newer", role, r.Oldest)
	case r.Newest.less(parsed.Minor):
		v.Message = fmt.Sprintf("Kubernetes %s is newer than the newest supported %s version, %s (supported: %s)", gitVersion, role, r.Newest, r)
		v.Advice = fmt.Sprintf("upgrade flotilla to a release that supports Kubernetes %s", parsed.Minor)
	default:
		v.Supported = true
		v.Message = fmt.Sprintf("Kubernetes %s is a supported %s version (%s)", gitVersion, role, r)
	}
	return v
}
