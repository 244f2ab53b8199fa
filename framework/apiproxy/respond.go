package apiproxy

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// errInjected is the message of every error the proxy answers with.
var errInjected = errors.New("injected by gauntlet's API proxy")

// writeStatus answers with an API error shaped as the API server shapes
// it, so that clients react as they would to the real thing (client-go
// retries a 429 after its Retry-After, for one).
func writeStatus(w http.ResponseWriter, code int, retryAfter time.Duration, info Info) {
	gr := schema.GroupResource{Resource: info.Resource}
	seconds := int(retryAfter / time.Second)
	var err *apierrors.StatusError
	switch code {
	case http.StatusConflict:
		err = apierrors.NewConflict(gr, info.Name, errInjected)
	case http.StatusTooManyRequests:
		err = apierrors.NewTooManyRequests(errInjected.Error(), seconds)
	case http.StatusServiceUnavailable:
		err = apierrors.NewServiceUnavailable(errInjected.Error())
	case http.StatusGatewayTimeout:
		err = apierrors.NewTimeoutError(errInjected.Error(), seconds)
	default:
		err = apierrors.NewInternalError(errInjected)
		err.ErrStatus.Code = int32(code)
	}
	if retryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(max(seconds, 1)))
	}
	writeJSON(w, int(err.ErrStatus.Code), status(err))
}

// status is the Status object of an API error, as it goes on the wire.
func status(err *apierrors.StatusError) metav1.Status {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	return st
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// holdUntilTimeout keeps the request from the API server until its client
// gives up or the rule's cap passes, then answers 504 as the API server's
// own request timeout does.
func (p *Proxy) holdUntilTimeout(w *statusRecorder, r *http.Request, x *exchange) {
	x.injected = x.rule.desc
	t := time.NewTimer(x.rule.timeoutAfter())
	defer t.Stop()
	select {
	case <-r.Context().Done():
		p.inject(x.rule.desc, x.info, "held the request until the client gave up after %s", round(time.Since(x.start)))
	case <-t.C:
		p.inject(x.rule.desc, x.info, "held the request %s, answered 504", round(time.Since(x.start)))
	}
	writeStatus(w, http.StatusGatewayTimeout, 0, x.info)
}

// reset closes the client's connection without an answer.
func reset(w http.ResponseWriter) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic(http.ErrAbortHandler)
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	// Under TLS the hijacked connection wraps the TCP one; without
	// lingering, closing it sends a reset, not an orderly goodbye.
	if tc, ok := conn.(*tls.Conn); ok {
		if tcp, ok := tc.NetConn().(*net.TCPConn); ok {
			_ = tcp.SetLinger(0)
		}
	}
	_ = conn.Close()
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// negotiate picks the Accept to send upstream: the JSON types the client
// accepts (keeping their parameters: a metadata-only client asks for
// PartialObjectMetadata as JSON), or plain JSON when it accepts anything.
// ok is false when the client accepts only other types (protobuf): then
// its Accept goes on untouched and the proxy does not read the answer.
func negotiate(accept string) (upstream string, ok bool) {
	if strings.TrimSpace(accept) == "" {
		return "application/json", true
	}
	var keep []string
	anything := false
	for part := range strings.SplitSeq(accept, ",") {
		part = strings.TrimSpace(part)
		mt, _, _ := strings.Cut(part, ";")
		switch strings.ToLower(strings.TrimSpace(mt)) {
		case "application/json":
			keep = append(keep, part)
		case "*/*", "application/*":
			anything = true
		}
	}
	switch {
	case len(keep) > 0:
		return strings.Join(keep, ", "), true
	case anything:
		return "application/json", true
	}
	return accept, false
}

// readBody reads an answer whole, to look into it, and puts it back. It
// returns nil for one too large to hold, which streams on unread.
func readBody(resp *http.Response) ([]byte, error) {
	if resp.ContentLength > maxReadBody {
		return nil, nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxReadBody+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxReadBody {
		rest := resp.Body
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), rest), rest}
		return nil, nil
	}
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}
