package client_test

import (
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/webhook/signature"
)

// A receiver of webhooks is an http.Handler: it reads the body as it came, verifies it
// with the endpoint's secret, skips a message it has handled already (a message may
// come more than once, with the same id), and answers 2xx once the event is taken in.
// Here the service's delivery is played by signing a request with the signature
// package, as the service does.
func ExampleVerifyWebhook() {
	const secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" // the endpoint's, from its owner's settings
	seen := map[string]bool{}                               // a real receiver keeps the ids in its database

	receiver := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "unreadable body", http.StatusBadRequest)
			return
		}
		ev, err := client.VerifyWebhook(secret, r.Header, body, time.Now(), 0)
		switch {
		case errors.Is(err, client.ErrWebhookTooOld), errors.Is(err, client.ErrWebhookTooNew):
			http.Error(w, "stale", http.StatusBadRequest) // a replay, or a clock to fix
			return
		case err != nil:
			http.Error(w, "not signed by the service", http.StatusUnauthorized)
			return
		}
		if seen[ev.ID] {
			w.WriteHeader(http.StatusNoContent) // handled already: say so, or it comes again
			return
		}
		switch ev.Type {
		case "key.rotated":
			var data struct {
				Account string `json:"account"`
				Key     string `json:"key"`
			}
			if err := ev.Decode(&data); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fmt.Printf("key %s of %s was rotated at %s\n", data.Key, data.Account, ev.Timestamp.Format(time.RFC3339))
		default:
			// An event type this receiver does not act on: accept it all the same.
		}
		seen[ev.ID] = true
		w.WriteHeader(http.StatusNoContent)
	})

	// The service's delivery, sent twice.
	const id = "msg_2c4h2h6rboqzu7ft3vxtqakr4e"
	body := `{"type":"key.rotated","timestamp":"2026-03-01T12:00:00Z","data":{"id":"` + id + `","account":"acme","actor":"operator","key":"key_1"}}`
	for range 2 {
		now := time.Now()
		sig, err := signature.Sign(id, now, []byte(body), secret)
		if err != nil {
			log.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/webhooks/tollgate", strings.NewReader(body))
		req.Header.Set("webhook-id", id)
		req.Header.Set("webhook-timestamp", strconv.FormatInt(now.Unix(), 10))
		req.Header.Set("webhook-signature", sig)
		rec := httptest.NewRecorder()
		receiver.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}

	// A forged delivery.
	req := httptest.NewRequest(http.MethodPost, "/webhooks/tollgate", strings.NewReader(body))
	req.Header.Set("webhook-id", id)
	req.Header.Set("webhook-timestamp", strconv.FormatInt(time.Now().Unix(), 10))
	req.Header.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	rec := httptest.NewRecorder()
	receiver.ServeHTTP(rec, req)
	fmt.Println(rec.Code)
	// Output:
	// key key_1 of acme was rotated at 2026-03-01T12:00:00Z
	// 204
	// 204
	// 401
}
