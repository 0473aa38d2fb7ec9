package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/internal/cleantext"
	"github.com/tollgate-dev/tollgate/internal/httpx"
)

// DefaultBatchItemBytes is the default [Options.BatchItemBytes].
const DefaultBatchItemBytes = 16 << 10

// HeaderIdempotencyKey carries the client's idempotency key of a batch.
const HeaderIdempotencyKey = "Idempotency-Key"

// HeaderIdempotentReplayed is "true" on the answer of a batch sent again with the
// Idempotency-Key of one that ran: the first answer, sent again.
const HeaderIdempotentReplayed = httpx.HeaderIdempotentReplayed

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
	c, ok := h.caller(w, r, auth.ChannelBatch)
	if !ok {
		return
	}
	reply := h.svc.CallBatch(r.Context(), c, tollgate.Batch{
		API:            r.PathValue("api_id"),
		IdempotencyKey: r.Header.Get(HeaderIdempotencyKey),
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
		h.writeError(w, r, reply.Err, &reply.Receipt)
		return
	}
	hdr := w.Header()
	h.setReceiptHeaders(hdr, &reply.Receipt)
	if reply.Replayed {
		hdr.Set(HeaderIdempotentReplayed, "true")
	}
	h.writeEncoded(w, r, http.StatusOK, encodeBatch(&reply))
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
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for i, it := range reply.Items {
		if i > 0 {
			b.WriteByte(',')
		}
		if it.Err == nil {
			b.WriteString(`{"status":"ok","error":null,"data":`)
			b.Write(it.JSON)
		} else {
			msg, _ := json.Marshal(cleantext.Message(it.Err.Message)) // a string always encodes
			b.WriteString(`{"status":"error","error":`)
			b.Write(msg)
			b.WriteString(`,"data":null,"code":"`)
			b.WriteString(it.Err.Code.String())
			b.WriteByte('"')
		}
		b.WriteString(`,"credits":`)
		b.WriteString(strconv.FormatInt(it.Credits, 10))
		b.WriteByte('}')
	}
	ok, failed := reply.Summary()
	fmt.Fprintf(&b, `],"summary":{"ok":%d,"failed":%d,"credits":%d}}`, ok, failed, reply.Receipt.Charged)
	return b.Bytes()
}
