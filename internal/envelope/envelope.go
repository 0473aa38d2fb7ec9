// Package envelope writes the response envelope of every JSON answer, shared by the
// REST front door and the admin handler:
//
//	{"status": "ok", "error": null, "data": ...}
//	{"status": "error", "error": "message", "data": null}
//
// It writes bytes around a marshalled value rather than marshalling a wrapper struct,
// which keeps the hot path of every REST call to one json.Marshal.
package envelope

import (
	"encoding/json"
	"net/http"

	"github.com/tollgate-dev/tollgate/internal/cleantext"
)

var (
	okPrefix  = []byte(`{"status":"ok","error":null,"data":`)
	okSuffix  = []byte(`}`)
	errPrefix = []byte(`{"status":"error","error":`)
	errSuffix = []byte(`,"data":null}`)

	jsonType = []string{"application/json"}
	noStore  = []string{"no-store"}
)

// Encode marshals data for [WriteData]. It fails only for values that JSON cannot
// encode, before anything is written.
func Encode(data any) ([]byte, error) { return json.Marshal(data) }

// WriteData writes a success envelope around encoded data (see [Encode]), with the given
// status. Cache-Control is no-store unless the caller set it.
func WriteData(w http.ResponseWriter, status int, encoded []byte) {
	hdr := w.Header()
	hdr["Content-Type"] = jsonType
	if _, ok := hdr["Cache-Control"]; !ok {
		hdr["Cache-Control"] = noStore
	}
	w.WriteHeader(status)
	w.Write(okPrefix)
	w.Write(encoded)
	w.Write(okSuffix)
}

// WriteError writes an error envelope with the given status and message, made clean
// text (see package cleantext).
func WriteError(w http.ResponseWriter, status int, message string) {
	msg, _ := json.Marshal(cleantext.Message(message)) // a string always encodes
	hdr := w.Header()
	hdr["Content-Type"] = jsonType
	hdr["Cache-Control"] = noStore
	w.WriteHeader(status)
	w.Write(errPrefix)
	w.Write(msg)
	w.Write(errSuffix)
}
