// Package nodeconfig loads, defaults and validates flotilla-node's
// configuration file (apis/config/v1alpha1.NodeConfig), rejecting unknown
// fields and inconsistent partitions with messages that name the field.
package nodeconfig

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"flotilla.io/flotilla/apis/config/v1alpha1"
)

// Load reads the file at path, or returns the configuration of one whole
// cluster named clusterName when path is empty, and defaults and validates it.
func Load(path, clusterName string, basePort int32) (*v1alpha1.NodeConfig, error) {
	cfg := &v1alpha1.NodeConfig{TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion, Kind: v1alpha1.Kind}}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
		if cfg, err = Parse(b); err != nil {
			return nil, fmt.Errorf("config %s: %w", path, err)
		}
	}
	Default(cfg, clusterName, basePort)
	if errs := Validate(cfg); len(errs) > 0 {
		if path == "" {
			return nil, errs.ToAggregate()
		}
		return nil, fmt.Errorf("config %s: %w", path, errs.ToAggregate())
	}
	return cfg, nil
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
			if partitioned || !emptySelector(vc.NodeSelector) {
				vc.NamespaceMapping = v1alpha1.Suffix
			}
		}
		if vc.KubeletPort == 0 {
			vc.KubeletPort = basePort + int32(i)
		}
	}
}

func emptySelector(s *metav1.LabelSelector) bool {
	return s == nil || (len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0)
}

// Validate checks a defaulted NodeConfig.
func Validate(cfg *v1alpha1.NodeConfig) field.ErrorList {
	var errs field.ErrorList
	path := field.NewPath("virtualClusters")
	names := map[string]int{}
	ports := map[int32]int{}
	for i, vc := range cfg.VirtualClusters {
		p := path.Index(i)
		for _, msg := range validation.IsDNS1123Subdomain(vc.Name) {
			errs = append(errs, field.Invalid(p.Child("name"), vc.Name, msg))
		}
		if j, dup := names[vc.Name]; dup {
			errs = append(errs, field.Duplicate(p.Child("name"), fmt.Sprintf("%s (also virtualClusters[%d])", vc.Name, j)))
		}
		names[vc.Name] = i
		if len(cfg.VirtualClusters) > 1 && emptySelector(vc.NodeSelector) {
			errs = append(errs, field.Required(p.Child("nodeSelector"), "every virtual cluster needs a node selector when there is more than one"))
		}
		if vc.NodeSelector != nil {
			if _, err := metav1.LabelSelectorAsSelector(vc.NodeSelector); err != nil {
				errs = append(errs, field.Invalid(p.Child("nodeSelector"), vc.NodeSelector, err.Error()))
			}
		}
		switch vc.NamespaceMapping {
		case v1alpha1.SameName, v1alpha1.Suffix:
		default:
			errs = append(errs, field.NotSupported(p.Child("namespaceMapping"), vc.NamespaceMapping, []string{string(v1alpha1.SameName), string(v1alpha1.Suffix)}))
		}
		if len(cfg.VirtualClusters) > 1 && vc.NamespaceMapping == v1alpha1.SameName {
			errs = append(errs, field.Invalid(p.Child("namespaceMapping"), vc.NamespaceMapping, "partitions of one member must not share namespaces; use Suffix"))
		}
		if vc.KubeletPort <= 0 || vc.KubeletPort > 65535 {
			errs = append(errs, field.Invalid(p.Child("kubeletPort"), vc.KubeletPort, "must be a TCP port"))
		} else if j, dup := ports[vc.KubeletPort]; dup {
			errs = append(errs, field.Duplicate(p.Child("kubeletPort"), fmt.Sprintf("%d (also virtualClusters[%d])", vc.KubeletPort, j)))
		}
		ports[vc.KubeletPort] = i
		for k, v := range vc.Labels {
			for _, msg := range validation.IsQualifiedName(k) {
				errs = append(errs, field.Invalid(p.Child("labels").Key(k), k, msg))
			}
			for _, msg := range validation.IsValidLabelValue(v) {
				errs = append(errs, field.Invalid(p.Child("labels").Key(k), v, msg))
			}
		}
	}
	return errs
}

// Selector returns the label selector of a validated virtual cluster.
func Selector(vc v1alpha1.VirtualCluster) labels.Selector {
	if emptySelector(vc.NodeSelector) {
		return labels.Everything()
	}
	s, _ := metav1.LabelSelectorAsSelector(vc.NodeSelector)
	return s
}
