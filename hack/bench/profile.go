package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// profileNodes fetches a CPU profile of --profile-seconds from every
// flotilla-node's pprof endpoint, and a heap profile after it, into dir as
// <placement>-<member>.cpu.pprof and .heap.pprof. It starts at once and the
// returned function waits for the profiles and returns the first error.
func profileNodes(ctx context.Context, t *target, dir, placement string) func() error {
	var wg sync.WaitGroup
	errs := make([]error, len(t.members))
	for i, m := range t.members {
		wg.Go(func() {
			base := filepath.Join(dir, placement+"-"+m.Name)
			url := "http://" + profilingAddress(i) + "/debug/pprof/"
			secs := int(t.opts.profileDuration.Seconds())
			if err := fetch(ctx, url+"profile?seconds="+strconv.Itoa(secs), base+".cpu.pprof", t.opts.profileDuration+time.Minute); err != nil {
				errs[i] = err
				return
			}
			errs[i] = fetch(ctx, url+"heap", base+".heap.pprof", time.Minute)
		})
	}
	return func() error {
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
		return nil
	}
}

func fetch(ctx context.Context, url, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("fetch %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("fetch %s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("fetch %s: %w", url, err)
	}
	return f.Close()
}

// heapProfiles fetches a heap profile of every flotilla-node, after a
// garbage collection (gc=1), into dir as <placement>-<member>.<what>.heap.pprof,
// and the same as text, whose end gives the runtime's MemStats (heap in use
// and idle, stacks, the runtime's own), as <what>.heap.txt.
func heapProfiles(ctx context.Context, t *target, dir, what string) error {
	for i, m := range t.members {
		base := filepath.Join(dir, placementName(t.opts.pin)+"-"+m.Name+"."+what+".heap")
		url := "http://" + profilingAddress(i) + "/debug/pprof/heap?gc=1"
		if err := fetch(ctx, url, base+".pprof", time.Minute); err != nil {
			return err
		}
		if err := fetch(ctx, url+"&debug=1", base+".txt", time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// placementName is how profiles and results name the placement.
func placementName(pin bool) string {
	if pin {
		return "pinned"
	}
	return "shared"
}
