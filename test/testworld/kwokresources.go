package testworld

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// kwok answers the kubelet API of its fake nodes (logs, attach, exec,
// port-forward) as its resources say; this file writes those resources, one
// configuration file per cluster, so that the kubelet API carries real bytes:
//
//   - logs and attach: the containers named in KwokLogContainers read their
//     own file, every other container the default one (see KwokLogFile);
//   - exec: the command runs in kwok's environment, as nobody, in /;
//   - port-forward: a stream to any port of any pod reaches
//     AdvertiseIP:KwokPortForwardPort, where a test may listen.
//
// Resource metrics (kwok's Metric and ClusterResourceUsage) come with the
// stage files instead: they name no path of this world.

// KwokPortForwardPort is the port on AdvertiseIP that kwok tunnels every
// port-forward stream to. Nothing listens there unless a test does. It lies
// below the range ports are allocated from and below the ephemeral range.
const KwokPortForwardPort = 19999

// KwokLogContainers returns the container names whose logs (and attach
// output) on fake nodes come from a file of their own; any other container
// shares the default file. Tests that need distinct streams per container
// name their containers so.
func KwokLogContainers() []string { return []string{"app", "sidecar"} }

// kwokDefaultLog is the base name of the log file of containers not in
// KwokLogContainers.
const kwokDefaultLog = "default"

// nobody is the user and group kwok runs exec'd commands as: a command run
// "in a container" of the test world runs on this machine.
const nobody = 65534

func (c *Cluster) kwokLogDir() string { return filepath.Join(c.Dir, "kwok", "logs") }

// KwokLogFile returns the file, in the CRI log format, that kwok serves as
// the logs of the containers named container on the cluster's fake nodes, or
// as the logs of their previous instance: Dir/kwok/logs/<container>.log for
// the names in KwokLogContainers, default.log for any other, and
// <base>-previous.log for previous. Attach follows the same current file.
func (c *Cluster) KwokLogFile(container string, previous bool) string {
	base := kwokDefaultLog
	if slices.Contains(KwokLogContainers(), container) {
		base = container
	}
	if previous {
		base += "-previous"
	}
	return filepath.Join(c.kwokLogDir(), base+".log")
}

// AppendKwokLog appends line, as written to stdout at time at, to
// KwokLogFile(container, previous). A line must not contain a newline.
func (c *Cluster) AppendKwokLog(container string, previous bool, at time.Time, line string) error {
	if strings.ContainsAny(line, "\r\n") {
		return fmt.Errorf("append kwok log of %s in %s: line %q has a line break", container, c.Name, line)
	}
	path := c.KwokLogFile(container, previous)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("append kwok log of %s in %s: %w", container, c.Name, err)
	}
	// One write per line, so that a follower never sees half a line.
	_, err = fmt.Fprintf(f, "%s stdout F %s\n", at.UTC().Format(time.RFC3339Nano), line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("append kwok log of %s in %s: %w", container, c.Name, err)
	}
	return nil
}

// writeKwokResources creates the log files and writes the cluster's kwok
// resources, returning the configuration file's path.
func (c *Cluster) writeKwokResources() (string, error) {
	if err := os.MkdirAll(c.kwokLogDir(), 0o755); err != nil {
		return "", fmt.Errorf("kwok resources for %s: %w", c.Name, err)
	}
	var logs, attaches []map[string]any
	for _, name := range append(KwokLogContainers(), "") {
		for _, previous := range []bool{false, true} {
			f, err := os.OpenFile(c.KwokLogFile(name, previous), os.O_CREATE|os.O_WRONLY, 0o644)
			if err != nil {
				return "", fmt.Errorf("kwok resources for %s: %w", c.Name, err)
			}
			if err := f.Close(); err != nil {
				return "", fmt.Errorf("kwok resources for %s: %w", c.Name, err)
			}
		}
		l := map[string]any{
			"logsFile":         c.KwokLogFile(name, false),
			"previousLogsFile": c.KwokLogFile(name, true),
		}
		a := map[string]any{"logsFile": c.KwokLogFile(name, false)}
		// An entry without containers is kwok's default.
		if name != "" {
			l["containers"] = []string{name}
			a["containers"] = []string{name}
		}
		logs = append(logs, l)
		attaches = append(attaches, a)
	}
	docs := []map[string]any{
		kwokResource("ClusterLogs", map[string]any{"logs": logs}),
		kwokResource("ClusterAttach", map[string]any{"attaches": attaches}),
		kwokResource("ClusterExec", map[string]any{"execs": []map[string]any{{
			"local": map[string]any{
				"workDir":         "/",
				"envs":            []map[string]string{{"name": "HOME", "value": "/"}},
				"securityContext": map[string]any{"runAsUser": nobody, "runAsGroup": nobody},
			},
		}}}),
		kwokResource("ClusterPortForward", map[string]any{"forwards": []map[string]any{{
			"target": map[string]any{"address": AdvertiseIP, "port": KwokPortForwardPort},
		}}}),
	}
	var out []byte
	for _, d := range docs {
		b, err := yaml.Marshal(d)
		if err != nil {
			return "", fmt.Errorf("kwok resources for %s: %w", c.Name, err)
		}
		out = append(append(out, "---\n"...), b...)
	}
	path := filepath.Join(c.Dir, "kwok", "resources.yaml")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return "", fmt.Errorf("kwok resources for %s: %w", c.Name, err)
	}
	return path, nil
}

func kwokResource(kind string, spec map[string]any) map[string]any {
	return map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1",
		"kind":       kind,
		"metadata":   map[string]any{"name": "testworld"},
		"spec":       spec,
	}
}
