// Package benchhttp holds the baseline of the REST benchmarks: what answering GET
// /v1/hash?text=... costs a bare net/http handler with no gateway in front of it. The
// benchmarks in package rest and the load tool internal/cmd/restbench compare Tollgate
// against it. [ByTurns] runs the variants of a benchmark by turns, for the benchmarks
// that compare a call with a feature on and off (metrics, tracing).
package benchhttp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
)

var (
	okPrefix = []byte(`{"status":"ok","error":null,"data":`)
	okSuffix = []byte(`}`)
)

// BareHash returns a handler that does the hash API's own work (parse the query,
// SHA-256, hex, marshal the result as a handler's map) and writes the same envelope as
// Tollgate, with the given headers. With nil headers it writes only Content-Type, as a
// hand-written handler does. Pass the headers of a real Tollgate answer to write the
// same bytes as Tollgate; the handler copies them into each response as values
// computed once, which is the least a real handler could do.
func BareHash(headers http.Header) http.HandlerFunc {
	headers = headers.Clone()
	headers.Del("Date")
	headers.Del("Content-Length")
	if headers.Get("Content-Type") == "" {
		if headers == nil {
			headers = http.Header{}
		}
		headers["Content-Type"] = []string{"application/json"}
	}
	return func(w http.ResponseWriter, r *http.Request) {
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		sum := sha256.Sum256([]byte(q.Get("text")))
		data, err := json.Marshal(map[string]any{"algorithm": "sha256", "hash": hex.EncodeToString(sum[:])})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		hdr := w.Header()
		for k, v := range headers {
			hdr[k] = v
		}
		w.WriteHeader(http.StatusOK)
		w.Write(okPrefix)
		w.Write(data)
		w.Write(okSuffix)
	}
}
