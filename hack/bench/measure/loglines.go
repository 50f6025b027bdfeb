// Error and warning lines flotilla-node logs during a phase.

package measure

import (
	"bufio"
	"cmp"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
)

// LogMark notes where each flotilla-node's log ends before a phase; Count
// reads what the phase added: lines at error and warning level, flotilla's
// own and virtual-kubelet's alike (one logrus logger), and the messages
// they carry. An operator reads such lines as faults, so a burst and its
// cleanup must log none.
type LogMark map[string]int64 // log path → size

// MarkLogs notes where the logs at paths end now. A nil mark, for a world
// without flotilla-node, counts nothing.
func MarkLogs(paths []string) LogMark {
	m := LogMark{}
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			m[p] = fi.Size()
		}
	}
	return m
}

// logLevel and logMessage pick logrus's text format apart.
var (
	logLevel   = regexp.MustCompile(`\blevel=(\w+)`)
	logMessage = regexp.MustCompile(`\bmsg="((?:[^"\\]|\\.)*)"`)
)

// Count adds phase.log_error_lines and phase.log_warning_lines to s: the
// lines at those levels the flotilla-nodes logged since the mark, and logs
// the most frequent messages with logf.
func (mark LogMark) Count(phase string, s Sample, logf func(string, ...any)) {
	if mark == nil {
		return
	}
	counts := map[string]int{}
	levels := map[string]int{}
	for path, from := range mark {
		readLevels(path, from, levels, counts)
	}
	s[phase+".log_error_lines"] = float64(levels["error"])
	s[phase+".log_warning_lines"] = float64(levels["warning"])
	type kv struct {
		msg string
		n   int
	}
	var top []kv
	for m, n := range counts {
		top = append(top, kv{m, n})
	}
	slices.SortFunc(top, func(a, b kv) int { return cmp.Or(cmp.Compare(b.n, a.n), strings.Compare(a.msg, b.msg)) })
	for i, e := range top {
		if i == 5 {
			break
		}
		logf("%s: %d× %s", phase, e.n, e.msg)
	}
}

// readLevels adds to levels the error and warning lines of the log at path
// from offset from on, and to counts each such line's "level: message".
func readLevels(path string, from int64, levels, counts map[string]int) {
	f, err := os.Open(path)
	if err != nil {
		return
	}
	defer f.Close()
	if _, err := f.Seek(from, io.SeekStart); err != nil {
		return
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		lv := logLevel.FindStringSubmatch(line)
		if lv == nil || (lv[1] != "error" && lv[1] != "warning") {
			continue
		}
		levels[lv[1]]++
		msg := "(no message)"
		if m := logMessage.FindStringSubmatch(line); m != nil {
			msg = m[1]
		}
		counts[lv[1]+": "+msg]++
	}
}
