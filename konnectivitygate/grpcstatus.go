package konnectivitygate

import (
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
)

// writeStatus ends a stream with a gRPC status and no message, as a
// Trailers-Only response: one HEADERS frame that ends the stream, the
// status in it. Nothing was written before; net/http sends the headers
// with END_STREAM when the handler returns without a body.
func writeStatus(w http.ResponseWriter, code codes.Code, msg string) {
	h := w.Header()
	h.Set("Content-Type", "application/grpc")
	h.Set("Grpc-Status", strconv.Itoa(int(code)))
	h.Set("Grpc-Message", encodeMessage(msg))
	w.WriteHeader(http.StatusOK)
}

// encodeMessage percent-encodes msg as the gRPC wire format wants
// grpc-message: every byte outside printable ASCII, and '%'.
func encodeMessage(msg string) string {
	var b strings.Builder
	for i := 0; i < len(msg); i++ {
		c := msg[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteString("%" + strings.ToUpper(strconv.FormatUint(uint64(c)|0x100, 16)[1:]))
	}
	return b.String()
}
