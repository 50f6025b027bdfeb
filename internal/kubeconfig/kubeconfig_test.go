package kubeconfig

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const valid = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
users:
- name: u
  user:
    token: abc
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := map[string]struct {
		path    string
		wantErr []string
	}{
		"valid":              {path: write("ok", valid)},
		"missing file":       {path: filepath.Join(dir, "nope"), wantErr: []string{"member kubeconfig", "nope", "does not exist"}},
		"not yaml":           {path: write("garbage", "{{{"), wantErr: []string{"member kubeconfig", "garbage", "cannot be parsed"}},
		"no current context": {path: write("noctx", strings.Replace(valid, "current-context: x", "", 1)), wantErr: []string{"member kubeconfig", "noctx"}},
		"no file given":      {path: "", wantErr: []string{"member kubeconfig: no file given"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg, err := Load("member", tc.path, false, 100, 200)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("Load: %v", err)
				}
				if cfg.Host != "https://127.0.0.1:6443" || cfg.QPS != 100 || cfg.Burst != 200 {
					t.Fatalf("Load = host %q qps %v burst %d", cfg.Host, cfg.QPS, cfg.Burst)
				}
				return
			}
			if err == nil {
				t.Fatal("Load succeeded, want error")
			}
			for _, w := range tc.wantErr {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}
