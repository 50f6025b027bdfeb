// Package nodeconfig loads and defaults flotilla-node's configuration file
// (apis/config/v1alpha1.NodeConfig), rejecting unknown fields, and validates
// it with apis/config/v1alpha1/validation, whose messages name the field.
package nodeconfig

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"flotilla.io/flotilla/apis/config/v1alpha1"
	"flotilla.io/flotilla/apis/config/v1alpha1/validation"
)

// Load reads the file at path, or returns the configuration of one whole
// cluster named clusterName when path is empty, and defaults and validates it.
// whole reports that it lists no virtual clusters: the whole member is
// one, which flotilla-node's node flags describe.
func Load(path, clusterName string, basePort int32) (cfg *v1alpha1.NodeConfig, whole bool, err error) {
	cfg = &v1alpha1.NodeConfig{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.Kind}}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, false, fmt.Errorf("config %s: %w", path, err)
		}
		if cfg, err = Parse(b); err != nil {
			return nil, false, fmt.Errorf("config %s: %w", path, err)
		}
	}
	whole = len(cfg.VirtualClusters) == 0
	Default(cfg, clusterName, basePort)
	if errs := validation.ValidateNodeConfig(cfg); len(errs) > 0 {
		if path == "" {
			return nil, false, errs.ToAggregate()
		}
		return nil, false, fmt.Errorf("config %s: %w", path, errs.ToAggregate())
	}
	return cfg, whole, nil
}

// Parse decodes a NodeConfig strictly: unknown or duplicated fields are errors.
func Parse(b []byte) (*v1alpha1.NodeConfig, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, errors.New("empty file")
	}
	j, err := yaml.YAMLToJSONStrict(b)
	if err != nil {
		return nil, err
	}
	var cfg v1alpha1.NodeConfig
	strict, err := kjson.UnmarshalStrict(j, &cfg)
	if err != nil {
		return nil, err
	}
	if len(strict) > 0 {
		return nil, errors.Join(strict...)
	}
	if cfg.APIVersion != v1alpha1.GroupVersion || cfg.Kind != v1alpha1.Kind {
		return nil, fmt.Errorf("apiVersion/kind: want %s %s, got %q %q", v1alpha1.GroupVersion, v1alpha1.Kind, cfg.APIVersion, cfg.Kind)
	}
	return &cfg, nil
}

// Default fills in what the file may leave out: the whole member as one
// virtual cluster named clusterName, namespace mappings, and kubelet ports
// counting up from basePort.
func Default(cfg *v1alpha1.NodeConfig, clusterName string, basePort int32) {
	if len(cfg.VirtualClusters) == 0 {
		cfg.VirtualClusters = []v1alpha1.VirtualCluster{{Name: clusterName, NamespaceMapping: v1alpha1.SameName}}
	}
	partitioned := len(cfg.VirtualClusters) > 1
	for i := range cfg.VirtualClusters {
		vc := &cfg.VirtualClusters[i]
		if vc.NamespaceMapping == "" {
			vc.NamespaceMapping = v1alpha1.SameName
			if partitioned || !validation.EmptySelector(vc.NodeSelector) {
				vc.NamespaceMapping = v1alpha1.Suffix
			}
		}
		if vc.KubeletPort == 0 {
			vc.KubeletPort = basePort + int32(i)
		}
		vc.Placement = placement(cfg.Placement, vc.Placement)
		if len(cfg.StorageClasses) > 0 {
			own := vc.StorageClasses
			vc.StorageClasses = maps.Clone(cfg.StorageClasses)
			maps.Copy(vc.StorageClasses, own)
		}
	}
}

// Placement defaults: the member's answer is awaited 30 s before a pod
// is handed back, and 10 minutes in a cluster whose autoscaler may add a
// node for it.
const (
	DefaultHandBackAfter        = 30 * time.Second
	DefaultNodeProvisionTimeout = 10 * time.Minute
)

// placement is own over shared, field by field, with the defaults.
func placement(shared, own *v1alpha1.Placement) *v1alpha1.Placement {
	out := &v1alpha1.Placement{}
	for _, pl := range []*v1alpha1.Placement{shared, own} {
		if pl == nil {
			continue
		}
		if pl.HandBackAfter != nil {
			out.HandBackAfter = pl.HandBackAfter.DeepCopy()
		}
		if pl.Growable != nil {
			out.Growable = ptr.To(*pl.Growable)
		}
		if pl.NodeProvisionTimeout != nil {
			out.NodeProvisionTimeout = pl.NodeProvisionTimeout.DeepCopy()
		}
		if pl.NodeShapes != nil {
			out.NodeShapes = slices.Clone(pl.NodeShapes)
		}
	}
	if out.HandBackAfter == nil {
		out.HandBackAfter = &metav1.Duration{Duration: DefaultHandBackAfter}
	}
	if out.Growable == nil {
		out.Growable = ptr.To(false)
	}
	if out.NodeProvisionTimeout == nil {
		out.NodeProvisionTimeout = &metav1.Duration{Duration: DefaultNodeProvisionTimeout}
	}
	return out
}

// Selector returns the label selector of a validated virtual cluster.
func Selector(vc v1alpha1.VirtualCluster) labels.Selector {
	if validation.EmptySelector(vc.NodeSelector) {
		return labels.Everything()
	}
	s, _ := metav1.LabelSelectorAsSelector(vc.NodeSelector)
	return s
}
