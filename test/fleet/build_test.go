package fleet

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"flotilla.io/flotilla/test/testworld"
)

// TestBuildIsTheImages fails when an image's Dockerfile and the tests
// build a binary differently: what the tests and the bench measure would
// then not be what users run.
func TestBuildIsTheImages(t *testing.T) {
	root, err := testworld.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"flotilla-node", testworld.KonnectivityGateCommand} {
		b, err := os.ReadFile(filepath.Join(root, "cmd", cmd, "Dockerfile"))
		if err != nil {
			t.Fatal(err)
		}
		env, flags := goBuildOf(t, string(b))
		for _, e := range testworld.BuildEnv {
			if !slices.Contains(env, e) {
				t.Errorf("%s's Dockerfile builds without %s; its environment: %q", cmd, e, env)
			}
		}
		if !slices.Equal(flags, slices.Sorted(slices.Values(testworld.BuildFlags))) {
			t.Errorf("%s's Dockerfile builds with flags %q, the tests with %q", cmd, flags, testworld.BuildFlags)
		}
	}
}

// goBuildOf returns the environment assignments before the Dockerfile's
// `go build` and its flags, sorted, as -flag=value, without -o and its
// argument and without the package.
func goBuildOf(t *testing.T, dockerfile string) (env, flags []string) {
	t.Helper()
	var run string
	for _, line := range strings.Split(strings.ReplaceAll(dockerfile, "\\\n", " "), "\n") {
		if strings.HasPrefix(line, "RUN ") && strings.Contains(line, "go build") {
			run = strings.TrimPrefix(line, "RUN ")
		}
	}
	words := shellWords(run)
	i := slices.Index(words, "go")
	if i < 0 || i+1 >= len(words) || words[i+1] != "build" {
		t.Fatalf("no `go build` in the Dockerfile's RUN lines: %q", run)
	}
	env = words[:i]
	args := words[i+2:]
	for j := 0; j < len(args); j++ {
		a := args[j]
		switch {
		case !strings.HasPrefix(a, "-"):
			// the package
		case a == "-o":
			j++
		case a == "-ldflags" || a == "-tags" || a == "-gcflags":
			if j+1 < len(args) {
				flags = append(flags, a+"="+args[j+1])
				j++
			}
		default:
			flags = append(flags, a)
		}
	}
	slices.Sort(flags)
	return env, flags
}

// shellWords splits s into words as a shell does for the Dockerfile's
// simple commands: on blanks, with double quotes grouping.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord, quoted := false, false
	for _, r := range s {
		switch {
		case r == '"':
			quoted, inWord = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
