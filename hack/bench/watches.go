package main

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

// watchCounts holds the open watches of an apiserver by resource, named as
// kubectl names them ("pods", "leases.coordination.k8s.io").
type watchCounts map[string]float64

// apiLoad is what one scrape of an apiserver's /metrics says about the
// load its clients put on it.
type apiLoad struct {
	watches watchCounts
	// rejected counts the requests answered 429 Too Many Requests since the
	// apiserver started (API priority and fairness, max in-flight): the
	// apiserver throttling its clients. rejectedBy breaks them down by
	// "VERB resource", and rejectedByFlow by API priority and fairness's
	// "flow schema/priority level/reason", which tells whose they were.
	rejected       float64
	rejectedBy     map[string]float64
	rejectedByFlow map[string]float64
}

// rejectedMetric counts the requests API priority and fairness rejected, by
// flow schema, priority level and reason (queue full, timed out in queue,
// ...).
const rejectedMetric = "apiserver_flowcontrol_rejected_requests_total"

// scrapeLoad reads an apiserver's open watches and rejected requests.
func scrapeLoad(ctx context.Context, c kubernetes.Interface) (apiLoad, error) {
	body, err := c.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return apiLoad{}, fmt.Errorf("get /metrics: %w", err)
	}
	l, err := parseLoad(body)
	if err != nil {
		return apiLoad{}, fmt.Errorf("parse /metrics: %w", err)
	}
	return l, nil
}

func parseLoad(body []byte) (apiLoad, error) {
	l := apiLoad{watches: watchCounts{}, rejectedBy: map[string]float64{}, rejectedByFlow: map[string]float64{}}
	err := forEachSample(bytes.NewReader(body), longrunningMetric, func(labels map[string]string, v float64) {
		if labels["verb"] != "WATCH" {
			return
		}
		if v != 0 {
			l.watches[groupResource(labels)] += v
		}
	})
	if err != nil {
		return apiLoad{}, err
	}
	err = forEachSample(bytes.NewReader(body), requestMetric, func(labels map[string]string, v float64) {
		if labels["code"] == "429" && v != 0 {
			l.rejected += v
			l.rejectedBy[requestKey(labels["verb"], labels["resource"], labels["subresource"])] += v
		}
	})
	if err != nil {
		return apiLoad{}, err
	}
	err = forEachSample(bytes.NewReader(body), rejectedMetric, func(labels map[string]string, v float64) {
		if v != 0 {
			l.rejectedByFlow[labels["flow_schema"]+"/"+labels["priority_level"]+"/"+labels["reason"]] += v
		}
	})
	return l, err
}

// total is the number of open watches.
func (w watchCounts) total() float64 {
	var n float64
	for _, v := range w {
		n += v
	}
	return n
}

// sub returns w - before per resource, leaving out resources that did not
// change.
func (w watchCounts) sub(before watchCounts) watchCounts {
	d := watchCounts{}
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

// settleQuiet is how long the open watches must stay the same before
// settledLoad trusts them: three readings a second apart.
const settleQuiet = 2 * time.Second

// discoveryResync is how often the controller-manager's garbage collector
// and quota controller look for new resources to watch (the policy CRDs the
// fleet installs, say); the world's first reading waits longer than that.
const discoveryResync = 30 * time.Second

// settledLoad reads every cluster's apiserver once a second until the open
// watches have stayed the same for quiet, and returns the last reading by
// cluster name. A watch that client-go is renewing at that moment (it
// renews each every 5 to 10 minutes), an informer still starting or a
// stopped process's watches still closing would otherwise be counted or
// missed.
func settledLoad(ctx context.Context, clusters []*testworld.Cluster, quiet, timeout time.Duration) (map[string]apiLoad, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var last map[string]apiLoad
	var since time.Time
	for {
		cur := map[string]apiLoad{}
		for _, c := range clusters {
			l, err := scrapeLoad(ctx, c.Client())
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

func sameWatches(a, b map[string]apiLoad) bool {
	if len(a) != len(b) {
		return false
	}
	for k, la := range a {
		lb, ok := b[k]
		if !ok || !maps.Equal(la.watches, lb.watches) {
			return false
		}
	}
	return true
}

func summarize(ls map[string]apiLoad) map[string]float64 {
	out := map[string]float64{}
	for k, l := range ls {
		out[k] = l.watches.total()
	}
	return out
}
