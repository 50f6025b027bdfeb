// Package kubeconfig loads the kubeconfig files flotilla is given, with
// errors that name the file and say what is wrong with it.
package kubeconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Load reads the kubeconfig at path for the given role ("host", "member")
// and returns its REST config with the client rate limits applied. An empty
// path means the in-cluster configuration when inCluster is true.
func Load(role, path string, inCluster bool, qps float32, burst int) (*rest.Config, error) {
	cfg, err := load(role, path, inCluster)
	if err != nil {
		return nil, err
	}
	cfg.QPS = qps
	cfg.Burst = burst
	return cfg, nil
}

func load(role, path string, inCluster bool) (*rest.Config, error) {
	if path == "" {
		if !inCluster {
			return nil, fmt.Errorf("%s kubeconfig: no file given", role)
		}
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("%s kubeconfig: none given and not running in a cluster: %w", role, err)
		}
		return cfg, nil
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s kubeconfig %s: file does not exist", role, path)
	} else if err != nil {
		return nil, fmt.Errorf("%s kubeconfig %s: %w", role, path, err)
	}
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("%s kubeconfig %s: cannot be parsed: %w", role, path, err)
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*raw, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%s kubeconfig %s: %w", role, path, err)
	}
	return cfg, nil
}
