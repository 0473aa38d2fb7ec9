package clientgen

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/tollgate-dev/tollgate/client"
	"github.com/tollgate-dev/tollgate/examples/clients/go/dateinfo"
	"github.com/tollgate-dev/tollgate/examples/clients/go/echo"
	"github.com/tollgate-dev/tollgate/examples/clients/go/hash"
	"github.com/tollgate-dev/tollgate/examples/clients/go/hmac"
	"github.com/tollgate-dev/tollgate/examples/clients/go/imageinfo"
	"github.com/tollgate-dev/tollgate/examples/clients/go/uuidgenerator"
	"github.com/tollgate-dev/tollgate/internal/testserver"
)

// TestGoPackages runs the generated Go packages of the sample catalog against a live
// server: a paid call of every API, the file and URL forms of the file API, a
// validation failure of each (which never reaches the network) and the mapping of
// refusals.
func TestGoPackages(t *testing.T) {
	srv := testserver.Start(t)
	opts := &client.Options{BaseURL: srv.URL}
	img := srv.ImageFile(t)
	must := func(t *testing.T, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		call func(ctx context.Context) (result any, credits client.Credits, err error)
		want string // the result, formatted with %+v
	}{
		{"hash", func(ctx context.Context) (any, client.Credits, error) {
			c, err := hash.New(testserver.PrimaryKey, opts)
			must(t, err)
			r, err := c.Execute(ctx, hash.Params{Text: "hello", Algorithm: client.Ptr("md5")})
			if err != nil {
				return nil, client.Credits{}, err
			}
			return r.Result, r.Credits, nil
		}, "{Algorithm:md5 Hash:5d41402abc4b2a76b9719d911017c592}"},
		{"hmac", func(ctx context.Context) (any, client.Credits, error) {
			c, err := hmac.New(testserver.PrimaryKey, opts)
			must(t, err)
			r, err := c.Execute(ctx, hmac.Params{Message: "hello", Secret: "key"})
			if err != nil {
				return nil, client.Credits{}, err
			}
			return r.Result, r.Credits, nil
		}, "{Hmac:9307b3b915efb5171ff14d8cb55fbcc798c6c0ef1456d66ded1a6aa723a58b7b Algorithm:sha256 Encoding:hex}"},
		{"uuid-generator", func(ctx context.Context) (any, client.Credits, error) {
			c, err := uuidgenerator.New(testserver.PrimaryKey, opts)
			must(t, err)
			r, err := c.Execute(ctx, uuidgenerator.Params{Count: client.Ptr[int64](3)})
			if err != nil {
				return nil, client.Credits{}, err
			}
			return fmt.Sprintf("%d %d", len(r.Result.Uuids), r.Result.Count), r.Credits, nil
		}, "3 3"},
		{"date-info", func(ctx context.Context) (any, client.Credits, error) {
			c, err := dateinfo.New(testserver.PrimaryKey, opts)
			must(t, err)
			r, err := c.Execute(ctx, dateinfo.Params{Date: "2024-02-29"})
			if err != nil {
				return nil, client.Credits{}, err
			}
			return r.Result, r.Credits, nil
		}, "{Date:2024-02-29 DayOfWeek:Thursday IsoWeek:9 UnixSeconds:1709164800 QuarterYear:Q1/2024 X1stOfMonth:2024-02-01 IsLeapYear:true}"},
		{"echo", func(ctx context.Context) (any, client.Credits, error) {
			c, err := echo.New(testserver.PrimaryKey, opts)
			must(t, err)
			r, err := c.Execute(ctx, echo.Params{Message: "hi", DelayMs: client.Ptr[int64](0)})
			if err != nil {
				return nil, client.Credits{}, err
			}
			return r.Result, r.Credits, nil
		}, "{Message:hi DelayMs:0}"},
		{"image-info/file", func(ctx context.Context) (any, client.Credits, error) {
			c, err := imageinfo.New(testserver.PrimaryKey, opts)
			must(t, err)
			r, err := c.ExecuteWithFile(ctx, img, imageinfo.Params{})
			if err != nil {
				return nil, client.Credits{}, err
			}
			return r.Result, r.Credits, nil
		}, fmt.Sprintf("{Format:png Width:%d Height:%d Bytes:%d}", testserver.PNGWidth, testserver.PNGHeight, len(srv.PNG))},
		{"image-info/url", func(ctx context.Context) (any, client.Credits, error) {
			c, err := imageinfo.New(testserver.PrimaryKey, opts)
			must(t, err)
			r, err := c.ExecuteWithURL(ctx, srv.FileURL, imageinfo.Params{})
			if err != nil {
				return nil, client.Credits{}, err
			}
			return r.Result, r.Credits, nil
		}, fmt.Sprintf("{Format:png Width:%d Height:%d Bytes:%d}", testserver.PNGWidth, testserver.PNGHeight, len(srv.PNG))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, credits, err := tt.call(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if s := fmt.Sprintf("%+v", got); s != tt.want {
				t.Errorf("result %s, want %s", s, tt.want)
			}
			// acme holds a grant, which its calls do not spend: they spend the allowance.
			if !credits.Reported || credits.Cost < 1 || credits.Granted != testserver.PrimaryGranted || credits.Remaining <= credits.Granted {
				t.Errorf("credits %+v, want a paid call, with %d of the balance granted", credits, testserver.PrimaryGranted)
			}
		})
	}
	t.Run("older service", func(t *testing.T) {
		// A service older than X-Credits-Granted: acme's grant is not reported.
		c, err := hash.New(testserver.PrimaryKey, &client.Options{BaseURL: srv.OlderURL})
		must(t, err)
		r, err := c.Execute(t.Context(), hash.Params{Text: "hello"})
		must(t, err)
		if !r.Credits.Reported || r.Credits.Cost != 1 || r.Credits.Granted != 0 || r.Credits.Remaining < testserver.PrimaryGranted {
			t.Errorf("credits %+v, want a paid call, none of the balance reported granted", r.Credits)
		}
	})
	calls := srv.APICalls()

	invalid := []struct {
		name  string
		call  func(ctx context.Context) error
		param string
	}{
		{"hash", func(ctx context.Context) error {
			c, _ := hash.New(testserver.PrimaryKey, opts)
			_, err := c.Execute(ctx, hash.Params{Text: "x", Algorithm: client.Ptr("crc32")})
			return err
		}, "algorithm"},
		{"hmac", func(ctx context.Context) error {
			c, _ := hmac.New(testserver.PrimaryKey, opts)
			_, err := c.Execute(ctx, hmac.Params{Message: "m"})
			return err
		}, "secret"},
		{"uuid-generator", func(ctx context.Context) error {
			c, _ := uuidgenerator.New(testserver.PrimaryKey, opts)
			_, err := c.Execute(ctx, uuidgenerator.Params{Count: client.Ptr[int64](101)})
			return err
		}, "count"},
		{"date-info", func(ctx context.Context) error {
			c, _ := dateinfo.New(testserver.PrimaryKey, opts)
			_, err := c.Execute(ctx, dateinfo.Params{Date: "29.02.2024"})
			return err
		}, "date"},
		{"echo", func(ctx context.Context) error {
			c, _ := echo.New(testserver.PrimaryKey, opts)
			_, err := c.Execute(ctx, echo.Params{Message: "m", DelayMs: client.Ptr[int64](5001)})
			return err
		}, "delay_ms"},
		{"image-info/no file", func(ctx context.Context) error {
			c, _ := imageinfo.New(testserver.PrimaryKey, opts)
			_, err := c.Execute(ctx, imageinfo.Params{})
			return err
		}, "image"},
		{"image-info/wrong type", func(ctx context.Context) error {
			c, _ := imageinfo.New(testserver.PrimaryKey, opts)
			_, err := c.ExecuteWithFile(ctx, "live_go_test.go", imageinfo.Params{})
			return err
		}, "image"},
		{"image-info/url", func(ctx context.Context) error {
			c, _ := imageinfo.New(testserver.PrimaryKey, opts)
			_, err := c.ExecuteWithURL(ctx, "not a url", imageinfo.Params{})
			return err
		}, "url"},
	}
	for _, tt := range invalid {
		t.Run("invalid/"+tt.name, func(t *testing.T) {
			var ve *client.ValidationError
			if err := tt.call(t.Context()); !errors.As(err, &ve) || ve.Param != tt.param {
				t.Errorf("error %v, want a ValidationError for %q", err, tt.param)
			}
		})
	}
	if n := srv.APICalls(); n != calls {
		t.Errorf("%d validation failures reached the network", n-calls)
	}

	refusals := []struct {
		key    string
		status int
		code   string
	}{
		{testserver.UnknownKey, 401, "unauthorized"},
		{testserver.RestrictedKey, 403, "forbidden"},
		{testserver.NoCreditsKey, 429, "credits_exhausted"},
	}
	for _, tt := range refusals {
		t.Run(fmt.Sprintf("refused/%d %s", tt.status, tt.code), func(t *testing.T) {
			c, err := hash.New(tt.key, opts)
			must(t, err)
			_, err = c.Execute(t.Context(), hash.Params{Text: "x"})
			var e *client.APIError
			if !errors.As(err, &e) || e.StatusCode != tt.status || e.Code != tt.code || e.Message == "" {
				t.Errorf("error %v, want %d %s", err, tt.status, tt.code)
			}
		})
	}
	t.Run("batches", func(t *testing.T) { goBatches(t, srv, opts) })
	for _, m := range srv.AuthModes() {
		if m != "go-package" {
			t.Fatalf("X-Auth-Mode %q, want go-package", m)
		}
	}
	if srv.CatalogFetches() != 0 {
		t.Errorf("the generated packages fetched the catalog; they carry their definition")
	}
}

// goBatches runs batches of the generated Go packages against a live server: the
// decoded results of items that succeeded, an item the API rejected, the URL form of a
// file API, a batch sent again with its idempotency key, and items that fail
// validation before anything is sent.
func goBatches(t *testing.T, srv *testserver.Server, opts *client.Options) {
	ctx := t.Context()
	balance := srv.Balance(t, "acme")
	hc, err := hash.New(testserver.PrimaryKey, opts)
	if err != nil {
		t.Fatal(err)
	}
	hr, err := hc.ExecuteBatch(ctx, []hash.Params{{Text: "hello"}, {Text: "hello", Algorithm: client.Ptr("md5")}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%+v", hr.Results); got != "[{Algorithm:sha256 Hash:2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824} {Algorithm:md5 Hash:5d41402abc4b2a76b9719d911017c592}]" ||
		hr.Credits.Cost != 2 || hr.Credits.Granted != testserver.PrimaryGranted || hr.Summary != (client.BatchSummary{OK: 2, Credits: 2}) || hr.Replayed {
		t.Errorf("hash batch: results %s, credits %+v, summary %+v", got, hr.Credits, hr.Summary)
	}

	dc, err := dateinfo.New(testserver.PrimaryKey, opts)
	if err != nil {
		t.Fatal(err)
	}
	dr, err := dc.ExecuteBatch(ctx, []dateinfo.Params{{Date: "2024-02-29"}, {Date: "2026-02-30"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var ie *client.ItemError
	if dr.Results[0].DayOfWeek != "Thursday" || !errors.As(dr.Items[1].Err, &ie) || ie.Code != "rejected" || ie.Index != 1 || dr.Items[1].Credits != 1 ||
		dr.Results[1] != (dateinfo.Result{}) || dr.Summary != (client.BatchSummary{OK: 1, Failed: 1, Credits: 2}) {
		t.Errorf("date-info batch: results %+v, items %+v, summary %+v", dr.Results, dr.Items, dr.Summary)
	}

	ic, err := imageinfo.New(testserver.PrimaryKey, opts)
	if err != nil {
		t.Fatal(err)
	}
	ir, err := ic.ExecuteBatch(ctx, []imageinfo.Params{{URL: &srv.FileURL}}, nil)
	if err != nil || ir.Results[0].Format != "png" || ir.Credits.Cost != 2 {
		t.Errorf("image-info batch: %+v, %v", ir, err)
	}

	uc, err := uuidgenerator.New(testserver.PrimaryKey, opts)
	if err != nil {
		t.Fatal(err)
	}
	key := &client.BatchOptions{IdempotencyKey: "job-7/chunk-1"}
	first, err := uc.ExecuteBatch(ctx, []uuidgenerator.Params{{Count: client.Ptr[int64](2)}}, key)
	if err != nil {
		t.Fatal(err)
	}
	again, err := uc.ExecuteBatch(ctx, []uuidgenerator.Params{{Count: client.Ptr[int64](2)}}, key)
	if err != nil || first.Replayed || !again.Replayed || fmt.Sprint(again.Results) != fmt.Sprint(first.Results) || len(first.Results[0].Uuids) != 2 {
		t.Errorf("uuid-generator batch sent twice: %+v then %+v (%v), want the first answer replayed", first.Results, again, err)
	}
	if got, want := srv.Balance(t, "acme"), balance-2-2-2-1; got != want {
		t.Errorf("balance %d, want %d: the batch sent again is not charged", got, want)
	}

	calls := srv.APICalls()
	for _, tt := range []struct {
		name  string
		call  func() error
		index int
		param string
	}{
		{"hash", func() error {
			_, err := hc.ExecuteBatch(ctx, []hash.Params{{Text: "a"}, {Text: "b", Algorithm: client.Ptr("crc32")}}, nil)
			return err
		}, 1, "algorithm"},
		{"image-info without a url", func() error {
			_, err := ic.ExecuteBatch(ctx, []imageinfo.Params{{}}, nil)
			return err
		}, 0, "image"},
	} {
		var ve *client.ItemValidationError
		if err := tt.call(); !errors.As(err, &ve) || ve.Index != tt.index || ve.Param != tt.param {
			t.Errorf("%s: error %v, want an ItemValidationError of item %d, parameter %q", tt.name, err, tt.index, tt.param)
		}
	}
	if n := srv.APICalls(); n != calls {
		t.Errorf("%d invalid batches reached the network", n-calls)
	}
}
