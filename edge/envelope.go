package edge

import (
	"encoding/json"
	"net/http"

	"github.com/tollgate-dev/tollgate/internal/cleantext"
	"github.com/tollgate-dev/tollgate/wire"
)

// The envelope of every JSON answer of the REST door, batches and the management APIs
// (see package wire) is written as bytes around a marshalled value rather than by
// marshalling a wrapper, which keeps the path of every REST call to one json.Marshal.
var (
	okPrefix = []byte(`{"status":"ok","error":null,"data":`)
	okSuffix = []byte(`}`)

	jsonType = []string{"application/json"}
	noStore  = []string{"no-store"}
)

// EncodeData marshals data for [WriteData]. It fails only for values that JSON cannot
// encode, before anything is written.
func EncodeData(data any) ([]byte, error) { return json.Marshal(data) }

// WriteData writes a success envelope around encoded data (see [EncodeData]), with the
// given status. Cache-Control is no-store unless the caller set it.
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

// WriteEnvelopeError writes an error envelope with the given status, code and message,
// the message made clean text (see package cleantext), and the code in X-Error-Code too.
func WriteEnvelopeError(w http.ResponseWriter, status int, code, message string) {
	hdr := w.Header()
	hdr["Content-Type"] = jsonType
	hdr["Cache-Control"] = noStore
	hdr[wire.HeaderErrorCode] = []string{code}
	w.WriteHeader(status)
	w.Write(ErrorBytes(code, message))
}

// DataBytes returns the bytes of the success envelope around encoded data, as
// [WriteData] writes them, for a page that shows an envelope rather than answering with
// it.
func DataBytes(encoded []byte) []byte { return wire.AppendOK(nil, encoded) }

// ErrorBytes returns the bytes of the error envelope of code and message, as
// [WriteEnvelopeError] writes them.
func ErrorBytes(code, message string) []byte {
	return wire.AppendError(nil, code, cleantext.Message(message))
}

// OpenAPIOK returns the OpenAPI response object of a success in the envelope: the
// envelope around data (a JSON Schema), for the path items of the doors that answer
// with it (rest.OpenAPIInfo.Paths gathers them into one document).
func OpenAPIOK(data map[string]any, description string) map[string]any {
	return map[string]any{
		"description": description,
		"content": map[string]any{"application/json": map[string]any{"schema": map[string]any{
			"type":     "object",
			"required": []string{"status", "error", "data"},
			"properties": map[string]any{
				"status": map[string]any{"const": "ok"},
				"error":  map[string]any{"type": "null"},
				"data":   data,
			},
		}}},
	}
}
