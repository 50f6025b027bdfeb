// Tests of counting log lines by level.

package measure

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReadLevels(t *testing.T) {
	path := filepath.Join(t.TempDir(), "flotilla-node.log")
	before := `time="t" level=error msg="before the mark"` + "\n"
	after := `time="t" level=info msg="Created pod in provider"
time="t" level=error msg="Force deleting pod in running state" key=a
time="t" level=warning msg="there was a \"conflict\"" key=b
time="t" level=error msg="Force deleting pod in running state" key=c
`
	if err := os.WriteFile(path, []byte(before+after), 0o600); err != nil {
		t.Fatal(err)
	}
	levels, counts := map[string]int{}, map[string]int{}
	readLevels(path, int64(len(before)), levels, counts)
	if levels["error"] != 2 || levels["warning"] != 1 {
		t.Errorf("levels %v, want 2 errors and 1 warning after the mark", levels)
	}
	if counts["error: Force deleting pod in running state"] != 2 || counts[`warning: there was a \"conflict\"`] != 1 {
		t.Errorf("counts %v", counts)
	}
}
