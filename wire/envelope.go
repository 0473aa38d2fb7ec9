package wire

import (
	"encoding/json"
	"strconv"
)

// The values of an envelope's status.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// An Envelope is the body of every JSON answer: Data on success, Error and Code on
// failure.
type Envelope struct {
	// Status is StatusOK or StatusError.
	Status string `json:"status"`
	// Error is the message of a failure, written for the caller; "" (null) on success.
	Error string `json:"error"`
	// Data is the answer's data; null on failure.
	Data json.RawMessage `json:"data"`
	// Code is the code of a failure (see the Code constants); absent on success.
	Code string `json:"code,omitempty"`
}

// A BatchItem is the answer of one item of a batch: its envelope, and the credits it
// was charged.
type BatchItem struct {
	Envelope
	Credits int64 `json:"credits"`
}

// A BatchSummary closes the answer of a batch: how many items succeeded and failed,
// and the credits the batch was charged.
type BatchSummary struct {
	OK      int   `json:"ok"`
	Failed  int   `json:"failed"`
	Credits int64 `json:"credits"`
}

// AppendOK appends the success envelope around data, which must be valid JSON.
func AppendOK(dst, data []byte) []byte {
	dst = append(dst, `{"status":"ok","error":null,"data":`...)
	dst = append(dst, data...)
	return append(dst, '}')
}

// AppendError appends the error envelope of a failure with the given code and
// message.
func AppendError(dst []byte, code, message string) []byte {
	return append(appendErrorFields(dst, code, message), '}')
}

// AppendBatchItem appends the answer of one batch item: the success envelope around
// data when code is "", else the error envelope of code and message; then its credits.
func AppendBatchItem(dst []byte, data []byte, code, message string, credits int64) []byte {
	if code == "" {
		dst = append(dst, `{"status":"ok","error":null,"data":`...)
		dst = append(dst, data...)
	} else {
		dst = appendErrorFields(dst, code, message)
	}
	dst = append(dst, `,"credits":`...)
	dst = strconv.AppendInt(dst, credits, 10)
	return append(dst, '}')
}

// AppendBatchSummary appends the summary of a batch.
func AppendBatchSummary(dst []byte, s BatchSummary) []byte {
	dst = append(dst, `{"ok":`...)
	dst = strconv.AppendInt(dst, int64(s.OK), 10)
	dst = append(dst, `,"failed":`...)
	dst = strconv.AppendInt(dst, int64(s.Failed), 10)
	dst = append(dst, `,"credits":`...)
	dst = strconv.AppendInt(dst, s.Credits, 10)
	return append(dst, '}')
}

// appendErrorFields appends an error envelope without its closing brace.
func appendErrorFields(dst []byte, code, message string) []byte {
	msg, _ := json.Marshal(message) // a string always encodes
	code2, _ := json.Marshal(code)
	dst = append(dst, `{"status":"error","error":`...)
	dst = append(dst, msg...)
	dst = append(dst, `,"data":null,"code":`...)
	return append(dst, code2...)
}
