package rest

import (
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/cleantext"
	"github.com/tollgate-dev/tollgate/internal/reqlog"
	"github.com/tollgate-dev/tollgate/wire"
)

// DefaultBatchItemBytes is the default [Options.BatchItemBytes].
const DefaultBatchItemBytes = 16 << 10

// serveBatch runs many inputs through one API: POST /v1/{api_id}/batch with the body
// {"items": [{params}, ...]}. The service runs the batch (tollgate.Service.CallBatch);
// the handler reads the items and writes the answer:
//
//	{"status": "ok", "error": null, "data": {
//	  "items": [
//	    {"status": "ok", "error": null, "data": {...}, "credits": 1},
//	    {"status": "error", "error": "text: ...", "data": null, "code": "invalid_input", "credits": 0}
//	  ],
//	  "summary": {"ok": 1, "failed": 1, "credits": 1}}}
//
// with the credit and rate headers of any call (X-Credits-Cost is the batch's charge),
// and Idempotent-Replayed: true on an answer sent again for an Idempotency-Key. A batch
// refused as a whole gets the usual error envelope.
func (h *Handler) serveBatch(w http.ResponseWriter, r *http.Request) {
	reqlog.From(r.Context()).SetDoor("batch")
	c, ok := h.door.Caller(w, r, auth.ChannelBatch)
	if !ok {
		return
	}
	reply := h.svc.CallBatch(r.Context(), c, tollgate.Batch{
		API:            r.PathValue("api_id"),
		IdempotencyKey: r.Header.Get(wire.HeaderIdempotencyKey),
		Items: func(api *catalog.API, max int) ([]any, error) {
			if r.Method != http.MethodPost {
				w.Header().Set("Allow", "POST, OPTIONS")
				return nil, &tollgate.Error{Code: tollgate.CodeMethodNotAllowed,
					Message: "a batch of the " + api.ID + " API is sent with POST, not " + r.Method}
			}
			return h.readBatch(w, r, api, max)
		},
	})
	if reply.Err != nil {
		h.door.WriteError(w, r, reply.Err, &reply.Receipt)
		return
	}
	hdr := w.Header()
	h.door.Receipt(hdr, &reply.Receipt)
	if reply.Replayed {
		hdr.Set(wire.HeaderIdempotentReplayed, "true")
	}
	h.door.WriteData(w, r, http.StatusOK, encodeBatch(&reply))
}

// readBatch reads a batch's body: a JSON object whose only field, items, is an array
// of items, each decoded as it is (the service validates them one by one). It reads at
// most max+1 items, enough for the service to refuse a batch of more than max. The body
// may hold MaxBodyBytes plus max times BatchItemBytes.
func (h *Handler) readBatch(w http.ResponseWriter, r *http.Request, api *catalog.API, max int) ([]any, error) {
	if len(r.URL.RawQuery) > 0 {
		return nil, invalid("a batch takes its items in the request body, not in the query string")
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
		msg := `a batch is a JSON body, {"items": [{...}, ...]}: send it as application/json`
		if api.File != nil {
			msg += fmt.Sprintf("; a file API takes the URL form in a batch: give each item the file's address in url, not an upload in %s", api.File.Name)
		}
		return nil, &tollgate.Error{Code: tollgate.CodeUnsupportedMediaType, Message: msg}
	}
	r.Body = http.MaxBytesReader(w, r.Body, h.maxBody+int64(max)*h.batchItemBytes)
	d := json.NewDecoder(r.Body)
	d.UseNumber()
	if err := expectDelim(d, '{', `the body must be a JSON object, {"items": [{...}, ...]}`); err != nil {
		return nil, err
	}
	var items []any
	found := false
	for d.More() {
		tok, err := d.Token()
		if err != nil {
			return nil, bodyError(err, "the body is not valid JSON")
		}
		if name, _ := tok.(string); name != "items" || found {
			return nil, invalid(`the body's only field is items, once: {"items": [{...}, ...]}`)
		}
		found = true
		if err := expectDelim(d, '[', "items must be an array of objects of parameters"); err != nil {
			return nil, err
		}
		for d.More() {
			if len(items) > max {
				return items, nil // the service refuses the batch, saying the limit
			}
			var v any
			if err := d.Decode(&v); err != nil {
				return nil, bodyError(err, fmt.Sprintf("item %d is not valid JSON", len(items)))
			}
			items = append(items, v)
		}
		if err := expectDelim(d, ']', ""); err != nil {
			return nil, err
		}
	}
	if !found {
		return nil, invalid(`the body has no items: send {"items": [{...}, ...]}`)
	}
	if err := expectDelim(d, '}', ""); err != nil {
		return nil, err
	}
	switch _, err := d.Token(); {
	case err == io.EOF:
		return items, nil
	case err == nil:
		return nil, invalid("the body must hold one JSON object and nothing after it")
	default:
		return nil, bodyError(err, "the body must hold one JSON object and nothing after it")
	}
}

// expectDelim reads the next token, which must be the delimiter want; msg says what
// was expected (empty: the JSON is malformed).
func expectDelim(d *json.Decoder, want json.Delim, msg string) error {
	tok, err := d.Token()
	if err != nil {
		return bodyError(err, "the body is not valid JSON")
	}
	if got, ok := tok.(json.Delim); !ok || got != want {
		if msg == "" {
			msg = "the body is not valid JSON"
		}
		return invalid("%s", msg)
	}
	return nil
}

// encodeBatch writes the data of a batch's answer: the envelope of each item, in
// order, and the summary.
func encodeBatch(reply *tollgate.BatchReply) []byte {
	b := append(make([]byte, 0, 64*len(reply.Items)+64), `{"items":[`...)
	for i, it := range reply.Items {
		if i > 0 {
			b = append(b, ',')
		}
		if it.Err == nil {
			b = wire.AppendBatchItem(b, it.JSON, "", "", it.Credits)
		} else {
			b = wire.AppendBatchItem(b, nil, it.Err.Code.String(), cleantext.Message(it.Err.Message), it.Credits)
		}
	}
	ok, failed := reply.Summary()
	b = append(b, `],"summary":`...)
	b = wire.AppendBatchSummary(b, wire.BatchSummary{OK: ok, Failed: failed, Credits: reply.Receipt.Charged})
	return append(b, '}')
}
