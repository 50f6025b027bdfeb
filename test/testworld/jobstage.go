package testworld

import (
	"fmt"
	"os"
	"path/filepath"
)

// jobCompleteStage finishes the running pods of Jobs. kwok's own
// pod-complete stage recognises Job pods by their owner reference, which a
// pod forwarded into a member does not carry (its Job lives in the host);
// Job pods carry the batch.kubernetes.io/job-name label on both sides.
// A pod annotated with JobPodRunFor (a Go duration) runs that long before it
// completes, as kwok's own pod-complete stage allows; others complete at once.
const jobCompleteStage = `apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: flotilla-job-pod-complete
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.metadata.labels["batch.kubernetes.io/job-name"]'
      operator: 'Exists'
  delay:
    durationMilliseconds: 0
    durationFrom:
      expressionFrom: '.metadata.annotations["` + JobPodRunFor + `"]'
  next:
    statusTemplate: |
      {{ $now := Now }}
      containerStatuses:
      {{ range .spec.containers }}
      - image: {{ .image | Quote }}
        name: {{ .name | Quote }}
        ready: false
        restartCount: 0
        started: false
        state:
          terminated:
            exitCode: 0
            reason: Completed
            startedAt: {{ $now | Quote }}
            finishedAt: {{ $now | Quote }}
      {{ end }}
      phase: Succeeded
`

// JobPodRunFor is the annotation on a Job's pod template that keeps its
// pods running for a while (a Go duration such as "10m") before they
// complete: a Job that holds its resources, as a real one does.
const JobPodRunFor = "pod-complete.stage.kwok.x-k8s.io/delay"

// writeJobStage writes jobCompleteStage into the cluster's directory.
func (c *Cluster) writeJobStage() (string, error) {
	path := filepath.Join(c.Dir, "kwok-job-stage.yaml")
	if err := os.WriteFile(path, []byte(jobCompleteStage), 0o644); err != nil {
		return "", fmt.Errorf("kwok job stage for %s: %w", c.Name, err)
	}
	return path, nil
}
