package telemetry

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/rest"
)

// CountAPIErrors makes every client built from cfg count its failed
// requests in errs, labelled verb, resource and code: the HTTP status, or
// "transport" when no response came back. Successful requests cost one
// comparison.
func CountAPIErrors(cfg *rest.Config, errs *prometheus.CounterVec) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &errorCounter{next: rt, errs: errs} })
}

// NewAPIErrors returns the counter CountAPIErrors fills, named name.
func NewAPIErrors(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"verb", "resource", "code"})
}

// CountAPIRequests makes every client built from cfg count its requests in
// requests, labelled apiserver (the given name: host or member), verb,
// resource and code ("transport" when no response came back): what
// flotilla-node asks of each apiserver, per kind of request, as
// rest_client_requests_total does for Kubernetes' own components but with
// the resource that says which work it was.
func CountAPIRequests(cfg *rest.Config, requests *prometheus.CounterVec, apiserver string) {
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return &requestCounter{next: rt, requests: requests, apiserver: apiserver}
	})
}

// NewAPIRequests returns the counter CountAPIRequests fills, named name.
func NewAPIRequests(name, help string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{"apiserver", "verb", "resource", "code"})
}

type requestCounter struct {
	next      http.RoundTripper
	requests  *prometheus.CounterVec
	apiserver string
}

func (c *requestCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	code := "transport"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	verb, res := classify(req)
	c.requests.WithLabelValues(c.apiserver, verb, res, code).Inc()
	return resp, err
}

type errorCounter struct {
	next http.RoundTripper
	errs *prometheus.CounterVec
}

func (c *errorCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(req)
	switch {
	case err != nil:
		verb, res := classify(req)
		c.errs.WithLabelValues(verb, res, "transport").Inc()
	case resp.StatusCode >= 400:
		verb, res := classify(req)
		c.errs.WithLabelValues(verb, res, strconv.Itoa(resp.StatusCode)).Inc()
	}
	return resp, err
}

// classify names a request's Kubernetes verb and resource from its method
// and path, so that label values stay few: resource names and namespaces
// never become labels.
func classify(req *http.Request) (verb, resource string) {
	// /api/v1/[namespaces/NS/]RESOURCE[/NAME[/SUB]] or
	// /apis/GROUP/VERSION/[namespaces/NS/]RESOURCE[/NAME[/SUB]]
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	named := false
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		parts = nil
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:]
	}
	if len(parts) > 0 {
		resource = parts[0]
		named = len(parts) > 1
		if len(parts) > 2 {
			resource += "/" + parts[2]
		}
	} else {
		resource, named = "other", true // discovery, health, version
	}
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = strings.ToLower(req.Method)
	}
	return verb, resource
}
