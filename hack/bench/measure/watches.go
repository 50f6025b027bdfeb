// An apiserver's open watches and the requests it refused.

package measure

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"time"

	"k8s.io/client-go/kubernetes"

	"flotilla.io/flotilla/test/testworld"
)

// longrunningMetric is the apiserver gauge of open long-running requests by
// verb, group and resource; with verb WATCH it counts the open watches.
// (The per-resource apiserver_registered_watchers is gone in v1.35.)
const longrunningMetric = "apiserver_longrunning_requests"

// WatchCounts holds the open watches of an apiserver by resource, named as
// kubectl names them ("pods", "leases.coordination.k8s.io").
type WatchCounts map[string]float64

// APILoad is what one scrape of an apiserver's /metrics says about the
// load its clients put on it.
type APILoad struct {
	Watches WatchCounts
	// Rejected counts the requests answered 429 Too Many Requests since the
	// apiserver started (API priority and fairness, max in-flight): the
	// apiserver throttling its clients. RejectedBy breaks them down by
	// "VERB resource", and RejectedByFlow by API priority and fairness's
	// "flow schema/priority level/reason", which tells whose they were.
	Rejected       float64
	RejectedBy     map[string]float64
	RejectedByFlow map[string]float64
}

// rejectedMetric counts the requests API priority and fairness rejected, by
// flow schema, priority level and reason (queue full, timed out in queue,
// ...).
const rejectedMetric = "apiserver_flowcontrol_rejected_requests_total"

// ScrapeLoad reads an apiserver's open watches and rejected requests.
func ScrapeLoad(ctx context.Context, c kubernetes.Interface) (APILoad, error) {
	body, err := c.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return APILoad{}, fmt.Errorf("get /metrics: %w", err)
	}
	l, err := parseLoad(body)
	if err != nil {
		return APILoad{}, fmt.Errorf("parse /metrics: %w", err)
	}
	return l, nil
}

func parseLoad(body []byte) (APILoad, error) {
	l := APILoad{Watches: WatchCounts{}, RejectedBy: map[string]float64{}, RejectedByFlow: map[string]float64{}}
	err := forEachSample(bytes.NewReader(body), longrunningMetric, func(labels map[string]string, v float64) {
		if labels["verb"] != "WATCH" {
			return
		}
		if v != 0 {
			l.Watches[groupResource(labels)] += v
		}
	})
	if err != nil {
		return APILoad{}, err
	}
	err = forEachSample(bytes.NewReader(body), requestMetric, func(labels map[string]string, v float64) {
		if labels["code"] == "429" && v != 0 {
			l.Rejected += v
			l.RejectedBy[RequestKey(labels["verb"], labels["resource"], labels["subresource"])] += v
		}
	})
	if err != nil {
		return APILoad{}, err
	}
	err = forEachSample(bytes.NewReader(body), rejectedMetric, func(labels map[string]string, v float64) {
		if v != 0 {
			l.RejectedByFlow[labels["flow_schema"]+"/"+labels["priority_level"]+"/"+labels["reason"]] += v
		}
	})
	return l, err
}

// Total is the number of open watches.
func (w WatchCounts) Total() float64 {
	var n float64
	for _, v := range w {
		n += v
	}
	return n
}

// Sub returns w - before per resource, leaving out resources that did not
// change.
func (w WatchCounts) Sub(before WatchCounts) WatchCounts {
	d := WatchCounts{}
	for k, v := range w {
		if dv := v - before[k]; dv != 0 {
			d[k] = dv
		}
	}
	for k, v := range before {
		if _, ok := w[k]; !ok && v != 0 {
			d[k] = -v
		}
	}
	return d
}

// SettleQuiet is how long the open watches must stay the same before
// settledLoad trusts them: three readings a second apart.
const SettleQuiet = 2 * time.Second

// DiscoveryResync is how often the controller-manager's garbage collector
// and quota controller look for new resources to watch (the policy CRDs the
// fleet installs, say); the world's first reading waits longer than that.
const DiscoveryResync = 30 * time.Second

// SettledLoad reads every cluster's apiserver once a second until the open
// watches have stayed the same for quiet, and returns the last reading by
// cluster name. A watch that client-go is renewing at that moment (it
// renews each every 5 to 10 minutes), an informer still starting or a
// stopped process's watches still closing would otherwise be counted or
// missed.
func SettledLoad(ctx context.Context, clusters []*testworld.Cluster, quiet, timeout time.Duration) (map[string]APILoad, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last map[string]APILoad
	var since time.Time
	for {
		cur := map[string]APILoad{}
		for _, c := range clusters {
			l, err := ScrapeLoad(ctx, c.Client())
			if err != nil {
				return nil, fmt.Errorf("watches of %s: %w", c.Name, err)
			}
			cur[c.Name] = l
		}
		now := time.Now()
		if last == nil || !sameWatches(last, cur) {
			since = now
		}
		last = cur
		if now.Sub(since) >= quiet {
			return cur, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("open watches did not stay the same for %s within %s (last %v): %w", quiet, timeout, summarize(last), ctx.Err())
		case <-tick.C:
		}
	}
}

func sameWatches(a, b map[string]APILoad) bool {
	if len(a) != len(b) {
		return false
	}
	for k, la := range a {
		lb, ok := b[k]
		if !ok || !maps.Equal(la.Watches, lb.Watches) {
			return false
		}
	}
	return true
}

func summarize(ls map[string]APILoad) map[string]float64 {
	out := map[string]float64{}
	for k, l := range ls {
		out[k] = l.Watches.Total()
	}
	return out
}
