package framework

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// Write is one write call a client made.
type Write struct {
	// Verb is create, update, patch, apply, delete or deleteAllOf, with a
	// "/status" (or other subresource) suffix for subresource writes.
	Verb string
	// Kind of the object written.
	Kind string
	// Key of the object written.
	Key client.ObjectKey
}

func (w Write) String() string { return fmt.Sprintf("%s %s %s", w.Verb, w.Kind, w.Key) }

// WriteLog records the writes made through the clients it wraps.
type WriteLog struct {
	mu     sync.Mutex
	writes []Write
}

// Wrap returns a client that records every write into the log and forwards
// every call to c.
func (l *WriteLog) Wrap(c client.Client) client.Client {
	return wrap(c, l.Funcs())
}

// Funcs returns interceptor functions that record every write into the log
// (before making it, whatever its outcome) and forward every call.
func (l *WriteLog) Funcs() interceptor.Funcs {
	return InterceptWrites(func(_ context.Context, c client.Client, call Call) (func(error), error) {
		kind := call.Kind(c.Scheme())
		if kind == "" {
			kind = "?"
		}
		l.append(Write{Verb: call.Verb, Kind: kind, Key: call.Key()})
		return nil, nil
	})
}

// Len is the number of writes recorded so far; pass it to Since.
func (l *WriteLog) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.writes)
}

// Since returns the writes recorded after the mark returned by Len.
func (l *WriteLog) Since(mark int) []Write {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Write(nil), l.writes[mark:]...)
}

// All returns every recorded write.
func (l *WriteLog) All() []Write { return l.Since(0) }

func (l *WriteLog) append(w Write) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, w)
}

// FormatWrites renders writes one per line.
func FormatWrites(ws []Write) string {
	lines := make([]string, len(ws))
	for i, w := range ws {
		lines[i] = "  " + w.String()
	}
	return strings.Join(lines, "\n")
}
