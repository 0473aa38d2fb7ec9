package edge_test

import (
	"net/http/httptest"
	"testing"

	"github.com/tollgate-dev/tollgate/edge"
)

func TestWriteErrorCleansTheMessage(t *testing.T) {
	rec := httptest.NewRecorder()
	edge.WriteEnvelopeError(rec, 400, "invalid_input", "bad\x00value %!q(<nil>)\n")
	const want = `{"status":"error","error":"bad` + "\uFFFD" + `value an unknown type","data":null,"code":"invalid_input"}`
	if rec.Code != 400 || rec.Body.String() != want {
		t.Fatalf("%d %s\nwant %s", rec.Code, rec.Body, want)
	}
}
