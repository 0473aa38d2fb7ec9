package testenv

import (
	"bufio"
	"bytes"
	"encoding/json"
	"log/slog"
	"sync"
	"testing"
)

// Logs collects what a logger writes, for the tests that check what was logged and at
// which level. It is safe for concurrent use.
type Logs struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

// A LogRecord is one record of a [Logs]: its level (DEBUG, INFO, WARN, ERROR), its
// message and its attributes (groups as nested maps).
type LogRecord struct {
	Level string
	Msg   string
	Attrs map[string]any
}

// Logger returns a logger that writes every record, of any level, to l.
func (l *Logs) Logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Write takes the lines of a JSON slog handler.
func (l *Logs) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

// Records returns every record logged so far.
func (l *Logs) Records(t testing.TB) []LogRecord {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []LogRecord
	sc := bufio.NewScanner(bytes.NewReader(l.buf.Bytes()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var attrs map[string]any
		if err := json.Unmarshal(sc.Bytes(), &attrs); err != nil {
			t.Fatalf("log line %q: %v", sc.Text(), err)
		}
		r := LogRecord{Attrs: attrs}
		r.Level, _ = attrs["level"].(string)
		r.Msg, _ = attrs["msg"].(string)
		delete(attrs, "level")
		delete(attrs, "msg")
		delete(attrs, "time")
		out = append(out, r)
	}
	return out
}

// String returns everything logged so far, as the handler wrote it: for checks that a
// secret appears nowhere in the logs.
func (l *Logs) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}
