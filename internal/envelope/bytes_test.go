package envelope

import (
	"net/http/httptest"
	"testing"
)

// TestBytesAreWhatIsWritten checks that Data and Error return the bytes WriteData and
// WriteError write.
func TestBytesAreWhatIsWritten(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteData(rec, 200, []byte(`{"a":1}`))
	if got := string(Data([]byte(`{"a":1}`))); got != rec.Body.String() {
		t.Errorf("Data = %s, WriteData wrote %s", got, rec.Body)
	}
	rec = httptest.NewRecorder()
	WriteError(rec, 400, "bad\x00value \"quoted\"")
	if got := string(Error("bad\x00value \"quoted\"")); got != rec.Body.String() {
		t.Errorf("Error = %s, WriteError wrote %s", got, rec.Body)
	}
}
