package client_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/examples/apis"
)

// A client is made once with the key, then calls APIs by id. The result is decoded
// from the data member of the envelope; the credit headers come with it.
func Example() {
	c, err := client.New(os.Getenv("TOLLGATE_API_KEY"), &client.Options{BaseURL: "http://localhost:8080"})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := c.Execute(context.Background(), "hash", map[string]any{"text": "hello", "algorithm": "sha256"})
	if err != nil {
		log.Fatal(err)
	}
	var result struct {
		Hash string `json:"hash"`
	}
	if err := resp.Decode(&result); err != nil {
		log.Fatal(err)
	}
	fmt.Println(result.Hash, "cost", resp.Credits.Cost, "credits; left:", resp.Credits.Remaining)
}

// A call that breaks the API's rules is refused before anything is sent, with an
// error that names the parameter. Here the definitions are given in the options, so
// the client never even fetches the catalog.
func ExampleClient_Execute_validation() {
	c, err := client.New("1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", &client.Options{Catalog: apis.All()})
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Execute(context.Background(), "hash", map[string]any{"text": "hello", "algorithm": "crc32"})
	var ve *client.ValidationError
	if errors.As(err, &ve) {
		fmt.Println(ve.Param)
		fmt.Println(err)
	}
	// Output:
	// algorithm
	// client: hash: parameter "algorithm": must be one of md5, sha1, sha256, sha512, got "crc32"
}

// A file API takes a local file, uploaded by the client, or the address of one, which
// the service fetches.
func ExampleClient_ExecuteWithFile() {
	c, err := client.New(os.Getenv("TOLLGATE_API_KEY"), nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	resp, err := c.ExecuteWithFile(ctx, "image-info", "photo.png", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", resp.Data)
	resp, err = c.ExecuteWithURL(ctx, "image-info", "https://example.com/photo.png", nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", resp.Data)
}

// A refusal of the service is an *APIError with the HTTP status, the machine-readable
// code and the envelope's message.
func ExampleAPIError() {
	c, err := client.New(os.Getenv("TOLLGATE_API_KEY"), nil)
	if err != nil {
		log.Fatal(err)
	}
	_, err = c.Execute(context.Background(), "hash", map[string]any{"text": "hello"})
	var apiErr *client.APIError
	switch {
	case errors.As(err, &apiErr) && apiErr.Code == "credits_exhausted":
		fmt.Println("out of credits until", apiErr.Credits.Renewal)
	case errors.As(err, &apiErr) && apiErr.StatusCode == 429:
		fmt.Println("slow down; retry after", apiErr.Rate.RetryAfter)
	case errors.As(err, &apiErr):
		fmt.Println(apiErr.StatusCode, apiErr.Message)
	case err != nil:
		fmt.Println("no answer:", err)
	}
}

// Retrying is opt-in: this policy makes up to four attempts on 429 and 5xx answers,
// waiting with exponential backoff and full jitter, or as long as Retry-After asks.
func ExampleRetryPolicy() {
	c, err := client.New(os.Getenv("TOLLGATE_API_KEY"), &client.Options{
		Retry: &client.RetryPolicy{MaxAttempts: 4, BaseDelay: 200 * time.Millisecond, MaxDelay: 5 * time.Second},
	})
	if err != nil {
		log.Fatal(err)
	}
	resp, err := c.Execute(context.Background(), "uuid-generator", map[string]any{"count": 5})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s\n", resp.Data)
}

// A batch calls one API with many inputs in one request. Each item has its own
// outcome: a result, or an *ItemError with the code and message a call of it alone
// would have had. The batch is charged the items that ran. docs/tour.md shows this
// example.
func ExampleClient_ExecuteBatch() {
	c, err := client.New(os.Getenv("TOLLGATE_API_KEY"), nil)
	if err != nil {
		log.Fatal(err)
	}
	items := []map[string]any{{"text": "hello"}, {"text": "world", "algorithm": "md5"}}
	opts := &client.BatchOptions{IdempotencyKey: "job-42/chunk-1"} // optional: sent again, it runs and charges once
	resp, err := c.ExecuteBatch(context.Background(), "hash", items, opts)
	if err != nil {
		log.Fatal(err) // nothing ran: an invalid item (*client.ItemValidationError), no credits, ...
	}
	for i, item := range resp.Items {
		var out struct{ Hash string }
		if err := item.Decode(&out); err != nil {
			fmt.Println(i, err) // a *client.ItemError, with the item's Code and Message
			continue
		}
		fmt.Println(i, out.Hash)
	}
	fmt.Println(resp.Summary.OK, "ok,", resp.Summary.Failed, "failed,", resp.Credits.Cost, "credits")
}

// An item that breaks the API's rules fails the whole batch before anything is sent,
// with an error naming the item (from 0) and the parameter.
func ExampleItemValidationError() {
	c, err := client.New("1b4e28ba-2fa1-4d3b-a3f5-ef19b5a7633b", &client.Options{Catalog: apis.All()})
	if err != nil {
		log.Fatal(err)
	}
	items := []map[string]any{{"count": 5}, {"count": 500}}
	_, err = c.ExecuteBatch(context.Background(), "uuid-generator", items, nil)
	var ie *client.ItemValidationError
	if errors.As(err, &ie) {
		fmt.Println(ie.Index, ie.Param)
		fmt.Println(err)
	}
	// Output:
	// 1 count
	// client: uuid-generator: item 1: parameter "count": must be at most 100, got 500
}
