// CPU and heap profiles from flotilla-node's pprof endpoint.

package measure

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

// Endpoint is a flotilla-node's pprof endpoint, named by its member.
type Endpoint struct {
	Member  string
	Address string
}

// CPUProfiles fetches a CPU profile of length d from every endpoint, and a
// heap profile after it, into dir as <placement>-<member>.cpu.pprof and
// .heap.pprof. It starts at once and the returned function waits for the
// profiles and returns the first error.
func CPUProfiles(ctx context.Context, endpoints []Endpoint, dir, placement string, d time.Duration) func() error {
	var wg sync.WaitGroup
	errs := make([]error, len(endpoints))
	for i, e := range endpoints {
		wg.Go(func() {
			base := filepath.Join(dir, placement+"-"+e.Member)
			url := "http://" + e.Address + "/debug/pprof/"
			secs := int(d.Seconds())
			if err := fetch(ctx, url+"profile?seconds="+strconv.Itoa(secs), base+".cpu.pprof", d+time.Minute); err != nil {
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

// HeapProfiles fetches a heap profile of every endpoint, after a garbage
// collection (gc=1), into dir as <placement>-<member>.<what>.heap.pprof,
// and the same as text, whose end gives the runtime's MemStats (heap in use
// and idle, stacks, the runtime's own), as <what>.heap.txt.
func HeapProfiles(ctx context.Context, endpoints []Endpoint, dir, placement, what string) error {
	for _, e := range endpoints {
		base := filepath.Join(dir, placement+"-"+e.Member+"."+what+".heap")
		url := "http://" + e.Address + "/debug/pprof/heap?gc=1"
		if err := fetch(ctx, url, base+".pprof", time.Minute); err != nil {
			return err
		}
		if err := fetch(ctx, url+"&debug=1", base+".txt", time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// PlacementName is how profiles and results name the placement.
func PlacementName(pin bool) string {
	if pin {
		return "pinned"
	}
	return "shared"
}
