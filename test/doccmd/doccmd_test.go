package doccmd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExtract(t *testing.T) {
	tests := map[string]struct {
		md   string
		want []Command
	}{
		"commands of sh, bash and shell blocks": {
			md:   "intro\n```sh\nkubectl get nodes\n```\n```bash\nhelm list\n```\n```shell\nmake demo\n```\n",
			want: []Command{{Line: 3, Text: "kubectl get nodes"}, {Line: 6, Text: "helm list"}, {Line: 9, Text: "make demo"}},
		},
		"other blocks hold no commands": {
			md:   "```yaml\nkind: Pod\n```\n```\nNAME READY\n```\n```text\n$ kubectl flotilla adopt\n```\n",
			want: nil,
		},
		"continuation lines are joined": {
			md:   "```sh\nhelm install beijing charts/flotilla-node \\\n  --namespace flotilla-system   \\\n  --create-namespace\n```\n",
			want: []Command{{Line: 2, Text: "helm install beijing charts/flotilla-node --namespace flotilla-system --create-namespace"}},
		},
		"comments, prompts and blank lines are dropped": {
			md:   "```sh\n# first the nodes\n\n$ kubectl get nodes   # one per member\nkubectl get pods -o jsonpath='{.items[*].metadata.name} #x'\n```\n",
			want: []Command{{Line: 4, Text: "kubectl get nodes"}, {Line: 5, Text: "kubectl get pods -o jsonpath='{.items[*].metadata.name} #x'"}},
		},
		"a hash inside a word is not a comment": {
			md:   "```sh\nkubectl get pods -l app#1=x\n```\n",
			want: []Command{{Line: 2, Text: "kubectl get pods -l app#1=x"}},
		},
		"a block closes only on its own fence": {
			md:   "~~~~sh\nkubectl version\n```\nkubectl get ns\n~~~~\nkubectl outside\n",
			want: []Command{{Line: 2, Text: "kubectl version"}, {Line: 3, Text: "```"}, {Line: 4, Text: "kubectl get ns"}},
		},
		"an unclosed continuation ends with its block": {
			md:   "```sh\nkubectl get \\\n```\n```sh\nkubectl get nodes\n```\n",
			want: []Command{{Line: 5, Text: "kubectl get nodes"}},
		},
		"indented fences in lists": {
			md:   "- step\n\n  ```sh\n  kubectl get nodes\n  ```\n",
			want: []Command{{Line: 4, Text: "kubectl get nodes"}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := Extract([]byte(tc.md))
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Extract (-want +got):\n%s", diff)
			}
		})
	}
}
