// An apiserver's request counters and flotilla-node's own, from their
// /metrics.

package measure

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"k8s.io/client-go/kubernetes"
)

// requestMetric is the apiserver counter of handled requests, labelled by
// verb, resource and subresource among others.
const requestMetric = "apiserver_request_total"

// RequestCounts holds apiserver_request_total summed over codes, groups and
// scopes, keyed by "VERB resource[/subresource]".
type RequestCounts map[string]float64

// ScrapeRequests reads an apiserver's request counters from its /metrics
// endpoint, which the admin identity may read. It is one GET, so it barely
// disturbs what it measures.
func ScrapeRequests(ctx context.Context, c kubernetes.Interface) (RequestCounts, error) {
	body, err := c.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("get /metrics: %w", err)
	}
	counts, err := parseRequestCounts(body)
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return counts, nil
}

// terminatedMetric counts the watches an apiserver's watch cache closed
// because their client did not take events as fast as they came: the
// watcher's buffer was full for longer than the dispatch could wait. Every
// such wait holds back the events of all watchers of that resource.
const terminatedMetric = "apiserver_terminated_watchers_total"

// verbTerminated keys terminatedMetric among the request counts. It is no
// request, so it counts in no request class's reads or writes.
const verbTerminated = "WATCH-TERMINATED"

// parseRequestCounts extracts apiserver_request_total, and the watches
// closed for falling behind (terminatedMetric, as "WATCH-TERMINATED
// resource"), from Prometheus text exposition.
func parseRequestCounts(body []byte) (RequestCounts, error) {
	counts := RequestCounts{}
	err := forEachSample(bytes.NewReader(body), requestMetric, func(labels map[string]string, v float64) {
		counts[RequestKey(labels["verb"], labels["resource"], labels["subresource"])] += v
	})
	if err != nil {
		return nil, err
	}
	err = forEachSample(bytes.NewReader(body), terminatedMetric, func(labels map[string]string, v float64) {
		counts[RequestKey(verbTerminated, groupResource(labels), "")] += v
	})
	if err != nil {
		return nil, err
	}
	return counts, nil
}

// forEachSample calls fn with the labels and value of every sample of
// metric in Prometheus text exposition. Only that metric is parsed: the
// full exposition of an apiserver is megabytes of histograms the bench does
// not need.
func forEachSample(r io.Reader, metric string, fn func(labels map[string]string, v float64)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	prefix := metric + "{"
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		labels, rest, err := parseLabels(line[len(prefix):])
		if err != nil {
			return fmt.Errorf("%s: %w", line, err)
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return fmt.Errorf("%s: no value", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return fmt.Errorf("%s: value: %w", line, err)
		}
		fn(labels, v)
	}
	return sc.Err()
}

// parseLabels parses `name="value",...}` and returns the labels and what
// follows the closing brace.
func parseLabels(s string) (map[string]string, string, error) {
	labels := map[string]string{}
	for {
		s = strings.TrimLeft(s, " ,")
		if strings.HasPrefix(s, "}") {
			return labels, s[1:], nil
		}
		name, rest, ok := strings.Cut(s, "=")
		if !ok || !strings.HasPrefix(rest, `"`) {
			return nil, "", fmt.Errorf("malformed label at %q", s)
		}
		var value strings.Builder
		i := 1
		for ; i < len(rest) && rest[i] != '"'; i++ {
			c := rest[i]
			if c == '\\' && i+1 < len(rest) {
				i++
				switch rest[i] {
				case 'n':
					c = '\n'
				default:
					c = rest[i]
				}
			}
			value.WriteByte(c)
		}
		if i >= len(rest) {
			return nil, "", fmt.Errorf("unterminated value of label %s", name)
		}
		labels[strings.TrimSpace(name)] = value.String()
		s = rest[i+1:]
	}
}

// groupResource names the resource of a sample labelled resource and
// group as kubectl names it: "pods", "leases.coordination.k8s.io".
func groupResource(labels map[string]string) string {
	if g := labels["group"]; g != "" {
		return labels["resource"] + "." + g
	}
	return labels["resource"]
}

// RequestKey is how request counts are keyed: "VERB resource[/subresource]",
// "(non-resource)" for a request of no resource.
func RequestKey(verb, resource, subresource string) string {
	if resource == "" {
		resource = "(non-resource)"
	}
	if subresource != "" {
		resource += "/" + subresource
	}
	return verb + " " + resource
}

// Sub returns c - before per key, leaving out keys that did not change.
func (c RequestCounts) Sub(before RequestCounts) RequestCounts {
	d := RequestCounts{}
	for k, v := range c {
		if dv := v - before[k]; dv != 0 {
			d[k] = dv
		}
	}
	return d
}

// Add adds o to c.
func (c RequestCounts) Add(o RequestCounts) {
	for k, v := range o {
		c[k] += v
	}
}

// RequestClass is a kind of API request as far as load goes.
type RequestClass string

const (
	ClassWrite RequestClass = "writes"
	ClassRead  RequestClass = "reads"
	ClassWatch RequestClass = "watches"
	ClassOther RequestClass = "other"
)

// ClassOf sorts the verbs apiserver_request_total reports (HTTP verbs for
// single objects, LIST/WATCH for collections, APPLY for server-side apply).
func ClassOf(verb string) RequestClass {
	switch verb {
	case "POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY", "CREATE", "UPDATE":
		return ClassWrite
	case "GET", "LIST":
		return ClassRead
	case "WATCH", "WATCHLIST":
		return ClassWatch
	}
	return ClassOther
}

// ByClass sums the counts per requestClass.
func (c RequestCounts) ByClass() map[RequestClass]float64 {
	out := map[RequestClass]float64{}
	for k, v := range c {
		verb, _, _ := strings.Cut(k, " ")
		out[ClassOf(verb)] += v
	}
	return out
}

// Writes sums the write requests (ClassWrite) of one resource, its
// subresources left out: "endpointslices" counts every create, update,
// patch and delete of EndpointSlices.
func (c RequestCounts) Writes(resource string) float64 {
	var n float64
	for k, v := range c {
		verb, res, _ := strings.Cut(k, " ")
		if res == resource && ClassOf(verb) == ClassWrite {
			n += v
		}
	}
	return n
}

// nodeRequestMetric is flotilla-node's count of its own API requests.
const nodeRequestMetric = "flotilla_node_api_requests_total"

// nodeVerbs maps flotilla-node's verb labels onto apiserver_request_total's.
var nodeVerbs = map[string]string{
	"create": "POST", "update": "PUT", "patch": "PATCH", "delete": "DELETE",
	"get": "GET", "list": "LIST", "watch": "WATCH",
}

// ScrapeNodeRequests reads flotilla-node's request counter from its /metrics
// endpoint at addr, keyed "apiserver VERB resource[/subresource]": every
// attempt, and apart those that did not succeed, keyed with their code
// ("apiserver VERB resource code"); see parseNodeRequests.
func ScrapeNodeRequests(ctx context.Context, addr string) (all, failed RequestCounts, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("get /metrics: %s", resp.Status)
	}
	return parseNodeRequests(resp.Body)
}

// parseNodeRequests counts flotilla-node's requests by attempt: client-go
// retries some answers itself (a 429 after its Retry-After, for one), and
// each try is counted, so failed tells them apart.
func parseNodeRequests(r io.Reader) (all, failed RequestCounts, err error) {
	all, failed = RequestCounts{}, RequestCounts{}
	err = forEachSample(r, nodeRequestMetric, func(labels map[string]string, v float64) {
		verb := nodeVerbs[labels["verb"]]
		if verb == "" {
			verb = strings.ToUpper(labels["verb"])
		}
		key := labels["apiserver"] + " " + verb + " " + labels["resource"]
		all[key] += v
		if code := labels["code"]; !strings.HasPrefix(code, "2") {
			failed[key+" "+code] += v
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return all, failed, nil
}
