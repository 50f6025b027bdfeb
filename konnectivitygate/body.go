package konnectivitygate

import "io"

// interruptible returns a reader of body whose Close ends a Read in
// flight. An agent's stream is quiet for long stretches, so the proxy's
// transport spends them in a Read of the agent's request body. When the
// server's connection is lost, the transport ends the upstream stream by
// closing the body it sends, and only once that Read returns does it
// release the response body the proxy is copying back to the agent: with
// net/http's request body, whose Read a Close does not interrupt (and
// httputil.ReverseProxy's wrapper, whose Close does nothing), the agent's
// stream would stay open to a server that is gone, and the agent would
// never dial again. A pipe's Close does interrupt its Read; the goroutine
// that fills it ends when the handler returns and net/http closes the
// request body.
func interruptible(body io.ReadCloser) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		_, err := io.Copy(pw, body)
		pw.CloseWithError(err) // nil: EOF
	}()
	return pr
}
