package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ContainerCommand is the command line of the named container of
// Deployment d (its command, else its image's entrypoint left for the
// caller to replace, then its args), as a kubelet would run it here: its
// $(VAR) references to its environment expanded — a pod IP is podIP — and
// the mount paths of its ConfigMap and Secret volumes pointing into dir,
// where their items, read through c, are written. It is how tests run a
// chart's containers without a container runtime.
func ContainerCommand(ctx context.Context, c kubernetes.Interface, d *appsv1.Deployment, container, podIP, dir string) ([]string, error) {
	spec := d.Spec.Template.Spec
	i := slices.IndexFunc(spec.Containers, func(c corev1.Container) bool { return c.Name == container })
	if i < 0 {
		return nil, fmt.Errorf("Deployment %s has no container %s", d.Name, container)
	}
	ctr := spec.Containers[i]
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	var replacements []string
	for _, m := range ctr.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("volume mount %s names no volume", m.Name)
		}
		var data map[string][]byte
		var items []corev1.KeyToPath
		switch {
		case v.ConfigMap != nil:
			cm, err := c.CoreV1().ConfigMaps(d.Namespace).Get(ctx, v.ConfigMap.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			data = map[string][]byte{}
			for k, s := range cm.Data {
				data[k] = []byte(s)
			}
			items = v.ConfigMap.Items
		case v.Secret != nil:
			s, err := c.CoreV1().Secrets(d.Namespace).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("volume %s: %w", v.Name, err)
			}
			data, items = s.Data, v.Secret.Items
		default:
			return nil, fmt.Errorf("volume %s: only ConfigMap and Secret volumes are run here", v.Name)
		}
		if len(items) == 0 {
			for k := range data {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		local := filepath.Join(dir, container, m.Name)
		for _, it := range items {
			b, ok := data[it.Key]
			if !ok {
				return nil, fmt.Errorf("volume %s has no key %s", v.Name, it.Key)
			}
			if err := os.MkdirAll(filepath.Dir(filepath.Join(local, it.Path)), 0o700); err != nil {
				return nil, err
			}
			if err := os.WriteFile(filepath.Join(local, it.Path), b, 0o600); err != nil {
				return nil, err
			}
		}
		replacements = append(replacements, "="+m.MountPath+"/", "="+local+"/")
	}
	for _, e := range ctr.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			replacements = append(replacements, "$("+e.Name+")", podIP)
		case e.ValueFrom == nil:
			replacements = append(replacements, "$("+e.Name+")", e.Value)
		}
	}
	r := strings.NewReplacer(replacements...)
	args := append(slices.Clone(ctr.Command), ctr.Args...)
	for i, a := range args {
		args[i] = r.Replace(a)
	}
	return args, nil
}
