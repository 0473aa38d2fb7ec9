package envelope

import (
	"net/http/httptest"
	"testing"
)

func TestWriteErrorCleansTheMessage(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteError(rec, 400, "bad\x00value %!q(<nil>)\n")
	const want = `{"status":"error","error":"bad` + "\uFFFD" + `value an unknown type","data":null}`
	if rec.Code != 400 || rec.Body.String() != want {
		t.Fatalf("%d %s\nwant %s", rec.Code, rec.Body, want)
	}
}
