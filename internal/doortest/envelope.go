package doortest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/tollgate-dev/tollgate/wire"
)

// EnvelopeCode reads the code of a refusal in the JSON envelope (package wire): a JSON
// object of exactly status "error", a non-empty error, data null and the code, which
// X-Error-Code repeats. It is the [Door.Code] of the doors that answer with the
// envelope: REST, batches, the account holders' API and the admin API.
func EnvelopeCode(status int, hdr http.Header, body []byte) (string, error) {
	if mt, _, err := mime.ParseMediaType(hdr.Get("Content-Type")); err != nil || mt != "application/json" {
		return "", fmt.Errorf("Content-Type %q, want application/json", hdr.Get("Content-Type"))
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(body, &fields); err != nil {
		return "", fmt.Errorf("the body is not a JSON object: %v", err)
	}
	if len(fields) != 4 {
		return "", fmt.Errorf("the envelope has %d fields, want status, error, data and code", len(fields))
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	var env wire.Envelope
	if err := d.Decode(&env); err != nil {
		return "", fmt.Errorf("the body is not an envelope: %v", err)
	}
	switch {
	case env.Status != wire.StatusError:
		return "", fmt.Errorf("status %q, want %q", env.Status, wire.StatusError)
	case env.Error == "":
		return "", errors.New("the error message is empty")
	case string(fields["data"]) != "null":
		return "", errors.New("data is not null")
	case env.Code == "" || env.Code != hdr.Get(wire.HeaderErrorCode):
		return "", fmt.Errorf("the envelope's code %q is not X-Error-Code's %q", env.Code, hdr.Get(wire.HeaderErrorCode))
	}
	return env.Code, nil
}
