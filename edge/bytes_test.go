package edge_test

import (
	"encoding/json"
	"net/http/httptest"
	"testing"

	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/wire"
)

// TestBytesAreWhatIsWritten checks that DataBytes and ErrorBytes return the bytes
// WriteData and WriteEnvelopeError write, and that both decode as the wire's envelope.
func TestBytesAreWhatIsWritten(t *testing.T) {
	rec := httptest.NewRecorder()
	edge.WriteData(rec, 200, []byte(`{"a":1}`))
	if got := string(edge.DataBytes([]byte(`{"a":1}`))); got != rec.Body.String() {
		t.Errorf("DataBytes = %s, WriteData wrote %s", got, rec.Body)
	}
	var env wire.Envelope
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Status != wire.StatusOK || string(env.Data) != `{"a":1}` {
		t.Errorf("success envelope decodes as %+v, %v", env, err)
	}
	rec = httptest.NewRecorder()
	edge.WriteEnvelopeError(rec, 400, wire.CodeInvalidInput, "bad\x00value \"quoted\"")
	if got := string(edge.ErrorBytes(wire.CodeInvalidInput, "bad\x00value \"quoted\"")); got != rec.Body.String() {
		t.Errorf("ErrorBytes = %s, WriteEnvelopeError wrote %s", got, rec.Body)
	}
	env = wire.Envelope{}
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil || env.Status != wire.StatusError || env.Code != wire.CodeInvalidInput || env.Data != nil && string(env.Data) != "null" {
		t.Errorf("error envelope decodes as %+v, %v", env, err)
	}
	if got := rec.Header().Get(wire.HeaderErrorCode); got != wire.CodeInvalidInput {
		t.Errorf("X-Error-Code %q", got)
	}
}
