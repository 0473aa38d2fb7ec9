package apis_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"image"
	"image/color"
	"image/color/palette"
	"image/gif"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/examples/apis"
)

// registry returns a registry holding the sample catalog.
func registry(t *testing.T) *catalog.Registry {
	t.Helper()
	reg := &catalog.Registry{}
	if err := apis.Register(reg); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return reg
}

// lookup returns a registered (compiled) API of the sample catalog.
func lookup(t *testing.T, id string) *catalog.API {
	t.Helper()
	api, ok := registry(t).Lookup(id)
	if !ok {
		t.Fatalf("API %q is not registered", id)
	}
	return api
}

// callQuery validates a query string and calls the API's handler.
func callQuery(ctx context.Context, t *testing.T, api *catalog.API, q url.Values) (map[string]any, error) {
	t.Helper()
	params, err := api.ValidateQuery(q)
	if err != nil {
		t.Fatalf("%s: ValidateQuery(%v): %v", api.ID, q, err)
	}
	return serve(ctx, t, api, params, nil)
}

// callJSON validates a JSON body and calls the API's handler.
func callJSON(ctx context.Context, t *testing.T, api *catalog.API, in map[string]any) (map[string]any, error) {
	t.Helper()
	params, err := api.ValidateJSON(in)
	if err != nil {
		t.Fatalf("%s: ValidateJSON(%v): %v", api.ID, in, err)
	}
	return serve(ctx, t, api, params, nil)
}

func serve(ctx context.Context, t *testing.T, api *catalog.API, params catalog.Params, file *catalog.File) (map[string]any, error) {
	t.Helper()
	out, err := api.Handler.ServeAPI(ctx, &catalog.Request{API: api, Params: params, File: file, AccountID: "acme", KeyID: "key_1"})
	if err != nil {
		return nil, err
	}
	m, ok := out.(map[string]any)
	if !ok {
		t.Fatalf("%s: the result is a %T, want a map[string]any", api.ID, out)
	}
	// The result holds exactly the declared fields.
	var want []string
	for _, f := range api.Result {
		want = append(want, f.Name)
	}
	var got []string
	for k := range m {
		got = append(got, k)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("%s: result fields %q, want the declared %q", api.ID, got, want)
	}
	return m, nil
}

func TestRegister(t *testing.T) {
	reg := registry(t)
	if n := len(reg.List()); n != 6 {
		t.Errorf("the registry holds %d APIs, want 6", n)
	}
	// Register refuses to add the catalog twice.
	if err := apis.Register(reg); !errors.Is(err, catalog.ErrDuplicate) {
		t.Errorf("registering twice: %v, want ErrDuplicate", err)
	}
	// Every definition also compiles on its own, and each call of All builds fresh
	// values.
	for _, a := range apis.All() {
		if _, err := catalog.Compile(a); err != nil {
			t.Errorf("Compile(%s): %v", a.ID, err)
		}
	}
	a, b := apis.All(), apis.All()
	a[0].Params[0].Name = "changed"
	if b[0].Params[0].Name == "changed" {
		t.Error("All returns shared definitions")
	}
}

// TestContract pins the public contract of the sample catalog, which tests, docs and the
// generated clients rely on: ids, methods, costs, parameters and result field names.
func TestContract(t *testing.T) {
	type param struct {
		name     string
		typ      catalog.Type
		required bool
		def      any
		enum     []any
		min, max *float64
		minLen   *int
		maxLen   *int
		format   catalog.Format
	}
	tests := []struct {
		id     string
		method string
		cost   int64
		params []param
		result []string
		file   *catalog.FileField
	}{
		{
			id: "hash", method: http.MethodGet, cost: 1,
			params: []param{
				{name: "text", typ: catalog.String, required: true, maxLen: catalog.Len(10000)},
				{name: "algorithm", typ: catalog.String, def: "sha256", enum: []any{"md5", "sha1", "sha256", "sha512"}},
			},
			result: []string{"algorithm", "hash"},
		},
		{
			id: "hmac", method: http.MethodPost, cost: 1,
			params: []param{
				{name: "message", typ: catalog.String, required: true},
				{name: "secret", typ: catalog.String, required: true, minLen: catalog.Len(1)},
				{name: "algorithm", typ: catalog.String, def: "sha256", enum: []any{"sha1", "sha256", "sha512"}},
				{name: "encoding", typ: catalog.String, def: "hex", enum: []any{"hex", "base64"}},
			},
			result: []string{"hmac", "algorithm", "encoding"},
		},
		{
			id: "uuid-generator", method: http.MethodGet, cost: 1,
			params: []param{
				{name: "count", typ: catalog.Integer, def: 1, min: catalog.Num(1), max: catalog.Num(100)},
			},
			result: []string{"uuids", "count"},
		},
		{
			id: "date-info", method: http.MethodGet, cost: 1,
			params: []param{
				{name: "date", typ: catalog.String, required: true, format: catalog.FormatDate},
			},
			result: []string{"date", "day-of-week", "iso:week", "unix.seconds", "quarter/year", "1st-of-month", "is leap year"},
		},
		{
			id: "echo", method: http.MethodPost, cost: 1,
			params: []param{
				{name: "message", typ: catalog.String, required: true, maxLen: catalog.Len(1000)},
				{name: "delay_ms", typ: catalog.Integer, def: 0, min: catalog.Num(0), max: catalog.Num(5000)},
			},
			result: []string{"message", "delay_ms"},
		},
		{
			id: "image-info", method: http.MethodPost, cost: 2,
			result: []string{"format", "width", "height", "bytes"},
			file:   &catalog.FileField{Name: "image", Types: []string{"image/png", "image/jpeg", "image/gif"}, MaxBytes: 5 << 20},
		},
	}
	all := apis.All()
	if len(all) != len(tests) {
		t.Fatalf("All returns %d APIs, want %d", len(all), len(tests))
	}
	reg := registry(t)
	for i, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			a := all[i]
			if a.ID != tt.id {
				t.Fatalf("All()[%d] is %q, want %q (the order of the documentation)", i, a.ID, tt.id)
			}
			if a.Method != tt.method || a.Cost != tt.cost {
				t.Errorf("method %s cost %d, want %s cost %d", a.Method, a.Cost, tt.method, tt.cost)
			}
			if a.Title == "" || a.Description == "" || a.Handler == nil {
				t.Errorf("title %q, description %q, handler %v: all are required", a.Title, a.Description, a.Handler)
			}
			if len(a.Params) != len(tt.params) {
				t.Fatalf("%d params, want %d", len(a.Params), len(tt.params))
			}
			for j, w := range tt.params {
				p := a.Params[j]
				if p.Name != w.name || p.Type != w.typ || p.Required != w.required || p.Format != w.format {
					t.Errorf("param %d = %s %s required=%v format=%q, want %s %s required=%v format=%q",
						j, p.Name, p.Type, p.Required, p.Format, w.name, w.typ, w.required, w.format)
				}
				if !reflect.DeepEqual(p.Default, w.def) || !reflect.DeepEqual(p.Enum, w.enum) {
					t.Errorf("param %s: default %v enum %v, want default %v enum %v", p.Name, p.Default, p.Enum, w.def, w.enum)
				}
				if !reflect.DeepEqual(p.Min, w.min) || !reflect.DeepEqual(p.Max, w.max) ||
					!reflect.DeepEqual(p.MinLength, w.minLen) || !reflect.DeepEqual(p.MaxLength, w.maxLen) {
					t.Errorf("param %s: bounds %v..%v length %v..%v, want %v..%v length %v..%v", p.Name,
						p.Min, p.Max, p.MinLength, p.MaxLength, w.min, w.max, w.minLen, w.maxLen)
				}
			}
			var result []string
			for _, f := range a.Result {
				result = append(result, f.Name)
			}
			if !slices.Equal(result, tt.result) {
				t.Errorf("result fields %q, want %q", result, tt.result)
			}
			switch {
			case tt.file == nil && a.File != nil:
				t.Errorf("file field %+v, want none", a.File)
			case tt.file != nil && (a.File == nil || a.File.Name != tt.file.Name ||
				!slices.Equal(a.File.Types, tt.file.Types) || a.File.MaxBytes != tt.file.MaxBytes):
				t.Errorf("file field %+v, want %+v", a.File, tt.file)
			}
			if _, ok := reg.Lookup(tt.id); !ok {
				t.Errorf("%s is not in the registry", tt.id)
			}
		})
	}
	// Each constructor returns its own API.
	for _, c := range []struct {
		id  string
		api catalog.API
	}{{"hash", apis.Hash()}, {"hmac", apis.HMAC()}, {"uuid-generator", apis.UUIDGenerator()},
		{"date-info", apis.DateInfo()}, {"echo", apis.Echo()}, {"image-info", apis.ImageInfo()}} {
		if c.api.ID != c.id {
			t.Errorf("the constructor of %s returns %q", c.id, c.api.ID)
		}
	}
}

func TestHash(t *testing.T) {
	api := lookup(t, "hash")
	funcs := map[string]func() hash.Hash{"md5": md5.New, "sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}
	tests := []struct {
		query     url.Values
		algorithm string
		literal   string // the known digest, when the row pins one
	}{
		{url.Values{"text": {"hello"}}, "sha256", "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"},
		{url.Values{"text": {"hello"}, "algorithm": {"md5"}}, "md5", "5d41402abc4b2a76b9719d911017c592"},
		{url.Values{"text": {"hello"}, "algorithm": {"sha1"}}, "sha1", "aaf4c61ddcc5e8a2dabede0f3b482cd9aea9434d"},
		{url.Values{"text": {"hello"}, "algorithm": {"sha256"}}, "sha256", ""},
		{url.Values{"text": {"hello"}, "algorithm": {"sha512"}}, "sha512",
			"9b71d224bd62f3785d96d46ad3ea3d73319bfbc2890caadae2dff72519673ca72323c3d99ba5c11d7c7acc6e14b8c5da0c4663475c2e5c3adef46f73bcdec043"},
		{url.Values{"text": {"héllo wörld ✓"}, "algorithm": {"sha512"}}, "sha512", ""},
		{url.Values{"text": {strings.Repeat("x", 10000)}}, "sha256", ""},
	}
	for _, tt := range tests {
		name := tt.algorithm
		if !tt.query.Has("algorithm") {
			name = "default " + name
		}
		if text := tt.query.Get("text"); text != "hello" {
			name += " " + strconv.Itoa(len(text)) + " bytes"
		}
		t.Run(name, func(t *testing.T) {
			m, err := callQuery(t.Context(), t, api, tt.query)
			if err != nil {
				t.Fatal(err)
			}
			h := funcs[tt.algorithm]()
			h.Write([]byte(tt.query.Get("text")))
			want := hex.EncodeToString(h.Sum(nil))
			if m["hash"] != want || m["algorithm"] != tt.algorithm {
				t.Errorf("result %v, want algorithm %s hash %s", m, tt.algorithm, want)
			}
			if tt.literal != "" && want != tt.literal {
				t.Errorf("crypto gives %s, the literal is %s", want, tt.literal)
			}
		})
	}
	refused := []url.Values{
		{},
		{"text": {""}},
		{"text": {strings.Repeat("x", 10001)}},
		{"text": {"hello"}, "algorithm": {"sha3"}},
		{"text": {"hello"}, "algorithm": {"SHA256"}},
		{"text": {"hello"}, "salt": {"x"}},
	}
	for _, q := range refused {
		if _, err := api.ValidateQuery(q); err == nil {
			t.Errorf("ValidateQuery(%.60v) accepted it", q)
		}
	}
}

func TestHMAC(t *testing.T) {
	api := lookup(t, "hmac")
	funcs := map[string]func() hash.Hash{"sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New}
	tests := []struct {
		in        map[string]any
		algorithm string
		encoding  string
	}{
		{map[string]any{"message": "hello", "secret": "key"}, "sha256", "hex"},
		{map[string]any{"message": "hello", "secret": "key", "encoding": "base64"}, "sha256", "base64"},
		{map[string]any{"message": "hello", "secret": "key", "algorithm": "sha1"}, "sha1", "hex"},
		{map[string]any{"message": "hello", "secret": "key", "algorithm": "sha512", "encoding": "base64"}, "sha512", "base64"},
		{map[string]any{"message": "x", "secret": "k"}, "sha256", "hex"},
		{map[string]any{"message": "The quick brown fox jumps over the lazy dog", "secret": "key", "algorithm": "sha1"}, "sha1", "hex"},
	}
	for _, tt := range tests {
		t.Run(tt.algorithm+" "+tt.encoding+" "+tt.in["message"].(string)[:1], func(t *testing.T) {
			m, err := callJSON(t.Context(), t, api, tt.in)
			if err != nil {
				t.Fatal(err)
			}
			mac := hmac.New(funcs[tt.algorithm], []byte(tt.in["secret"].(string)))
			mac.Write([]byte(tt.in["message"].(string)))
			sum := mac.Sum(nil)
			want := hex.EncodeToString(sum)
			if tt.encoding == "base64" {
				want = base64.StdEncoding.EncodeToString(sum)
			}
			if m["hmac"] != want || m["algorithm"] != tt.algorithm || m["encoding"] != tt.encoding {
				t.Errorf("result %v, want hmac %s algorithm %s encoding %s", m, want, tt.algorithm, tt.encoding)
			}
		})
	}
	// A known vector (the Wikipedia example of HMAC-SHA1).
	m, err := callJSON(t.Context(), t, api, map[string]any{"message": "The quick brown fox jumps over the lazy dog", "secret": "key", "algorithm": "sha1"})
	if err != nil || m["hmac"] != "de7c9b85b8b78aa6bc8a7a36f70a90701c9db4d9" {
		t.Errorf("HMAC-SHA1 of the fox: %v, %v", m, err)
	}
	refused := []map[string]any{
		{"message": "hello"},
		{"secret": "key"},
		{"message": "hello", "secret": ""},
		{"message": "hello", "secret": "key", "algorithm": "md5"},
		{"message": "hello", "secret": "key", "encoding": "base32"},
		{"message": 5, "secret": "key"},
		{"message": "", "secret": "key"},
	}
	for _, in := range refused {
		if _, err := api.ValidateJSON(in); err == nil {
			t.Errorf("ValidateJSON(%v) accepted it", in)
		}
	}
}

var v4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestUUIDGenerator(t *testing.T) {
	api := lookup(t, "uuid-generator")
	for _, tt := range []struct {
		query url.Values
		count int
	}{
		{url.Values{}, 1},
		{url.Values{"count": {"1"}}, 1},
		{url.Values{"count": {"2"}}, 2},
		{url.Values{"count": {"100"}}, 100},
	} {
		name := "count " + strconv.Itoa(tt.count)
		if !tt.query.Has("count") {
			name = "default count"
		}
		t.Run(name, func(t *testing.T) {
			m, err := callQuery(t.Context(), t, api, tt.query)
			if err != nil {
				t.Fatal(err)
			}
			ids, ok := m["uuids"].([]string)
			if !ok || len(ids) != tt.count || m["count"] != int64(tt.count) {
				t.Fatalf("result %v, want %d uuids", m, tt.count)
			}
			seen := map[string]bool{}
			for _, id := range ids {
				u, err := uuid.Parse(id)
				if err != nil || u.Version() != 4 || u.Variant() != uuid.RFC4122 || !v4.MatchString(id) {
					t.Errorf("%q is not a lowercase version 4 UUID (%v)", id, err)
				}
				if seen[id] {
					t.Errorf("%q appears twice", id)
				}
				seen[id] = true
			}
		})
	}
	for _, c := range []string{"0", "101", "-1", "1.5", "ten", ""} {
		_, err := api.ValidateQuery(url.Values{"count": {c}})
		var pe *catalog.ParamError
		if !errors.As(err, &pe) || pe.Param != "count" {
			t.Errorf("count=%q: %v, want a ParamError naming count", c, err)
		}
	}
}

func TestDateInfo(t *testing.T) {
	api := lookup(t, "date-info")
	tests := []struct {
		date    string
		weekday string
		week    int
		unix    int64
		quarter string
		first   string
		leap    bool
	}{
		{"2024-02-29", "Thursday", 9, 1709164800, "Q1/2024", "2024-02-01", true},
		{"2023-12-31", "Sunday", 52, 1703980800, "Q4/2023", "2023-12-01", false},
		{"2026-01-01", "Thursday", 1, 1767225600, "Q1/2026", "2026-01-01", false},
		{"2021-01-03", "Sunday", 53, 1609632000, "Q1/2021", "2021-01-01", false},
		{"2000-02-29", "Tuesday", 9, 951782400, "Q1/2000", "2000-02-01", true},
		{"1900-03-01", "Thursday", 9, -2203891200, "Q1/1900", "1900-03-01", false},
		{"2025-07-15", "Tuesday", 29, 1752537600, "Q3/2025", "2025-07-01", false},
		{"1970-01-01", "Thursday", 1, 0, "Q1/1970", "1970-01-01", false},
	}
	for _, tt := range tests {
		t.Run(tt.date, func(t *testing.T) {
			m, err := callQuery(t.Context(), t, api, url.Values{"date": {tt.date}})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]any{
				"date": tt.date, "day-of-week": tt.weekday, "iso:week": tt.week, "unix.seconds": tt.unix,
				"quarter/year": tt.quarter, "1st-of-month": tt.first, "is leap year": tt.leap,
			}
			if !reflect.DeepEqual(m, want) {
				t.Errorf("result\n%#v\nwant\n%#v", m, want)
			}
			// unix.seconds is midnight UTC.
			if d := time.Unix(tt.unix, 0).UTC(); d.Format(time.DateOnly) != tt.date || d.Hour() != 0 {
				t.Errorf("unix.seconds %d is %s", tt.unix, d)
			}
		})
	}

	// Well-formed but impossible dates pass validation and are rejected (charged) by
	// the API.
	for _, d := range []string{"2026-02-30", "2023-02-29", "2026-13-01", "2026-00-10", "2026-04-31", "1900-02-29"} {
		_, err := callQuery(t.Context(), t, api, url.Values{"date": {d}})
		var rej *catalog.RejectError
		if !errors.As(err, &rej) || !strings.Contains(rej.Message, d) {
			t.Errorf("date %s: %v, want a RejectError naming it", d, err)
		}
	}
	// Malformed dates never reach the handler.
	for _, d := range []string{"2026-2-3", "2026/02/03", "20260203", "2026-02-03T00:00:00Z", " 2026-02-03", ""} {
		_, err := api.ValidateQuery(url.Values{"date": {d}})
		var pe *catalog.ParamError
		if !errors.As(err, &pe) || pe.Param != "date" {
			t.Errorf("date %q: %v, want a ParamError naming date", d, err)
		}
	}
	if _, err := api.ValidateQuery(url.Values{}); err == nil {
		t.Error("date-info without a date passed validation")
	}
}

func TestEcho(t *testing.T) {
	api := lookup(t, "echo")

	// Time inside the bubble is fake: the handler's timer fires exactly when the
	// delay is over, and the test observes it without waiting.
	for _, tt := range []struct {
		in    map[string]any
		msg   string
		delay int64
	}{
		{map[string]any{"message": "hello"}, "hello", 0},
		{map[string]any{"message": "hi", "delay_ms": 0}, "hi", 0},
		{map[string]any{"message": "wait", "delay_ms": 1500}, "wait", 1500},
		{map[string]any{"message": strings.Repeat("m", 1000), "delay_ms": 5000}, strings.Repeat("m", 1000), 5000},
	} {
		t.Run("delay "+strconv.FormatInt(tt.delay, 10)+" "+strconv.Itoa(len(tt.in)), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				start := time.Now()
				m, err := callJSON(t.Context(), t, api, tt.in)
				if err != nil {
					t.Fatal(err)
				}
				if m["message"] != tt.msg || m["delay_ms"] != tt.delay {
					t.Errorf("result %v, want message %.20q delay_ms %d", m, tt.msg, tt.delay)
				}
				if got := time.Since(start); got != time.Duration(tt.delay)*time.Millisecond {
					t.Errorf("the call took %s (fake time), want %dms", got, tt.delay)
				}
			})
		})
	}

	t.Run("canceled", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			params, err := api.ValidateJSON(map[string]any{"message": "slow", "delay_ms": 5000})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			done := make(chan error, 1)
			go func() {
				_, err := api.Handler.ServeAPI(ctx, &catalog.Request{API: api, Params: params})
				done <- err
			}()
			synctest.Wait() // the handler is waiting for its delay
			select {
			case err := <-done:
				t.Fatalf("the handler returned before its delay or a cancel: %v", err)
			default:
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("err %v, want context.Canceled", err)
			}
			if got := time.Since(start); got != 0 {
				t.Errorf("the canceled call returned after %s (fake time), want at once", got)
			}
		})
	})

	t.Run("deadline", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
			defer cancel()
			start := time.Now()
			_, err := callJSON(ctx, t, api, map[string]any{"message": "slow", "delay_ms": 5000})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err %v, want context.DeadlineExceeded", err)
			}
			if got := time.Since(start); got != 100*time.Millisecond {
				t.Errorf("returned after %s (fake time), want 100ms", got)
			}
		})
	})

	for _, in := range []map[string]any{
		{},
		{"message": strings.Repeat("m", 1001)},
		{"message": "x", "delay_ms": -1},
		{"message": "x", "delay_ms": 5001},
		{"message": "x", "delay_ms": 1.5},
		{"message": "x", "delay": 10},
	} {
		if _, err := api.ValidateJSON(in); err == nil {
			t.Errorf("ValidateJSON(%.40v) accepted it", in)
		}
	}
}

// encodeImage returns an image of the given size in a format.
func encodeImage(t *testing.T, format string, w, h int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{uint8(x * 7), uint8(y * 13), 99, 255})
		}
	}
	var buf bytes.Buffer
	var err error
	switch format {
	case "png":
		err = png.Encode(&buf, img)
	case "jpeg":
		err = jpeg.Encode(&buf, img, &jpeg.Options{Quality: 80})
	case "gif":
		p := image.NewPaletted(img.Bounds(), palette.Plan9)
		for x := range w {
			for y := range h {
				p.Set(x, y, img.At(x, y))
			}
		}
		err = gif.Encode(&buf, p, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestImageInfo(t *testing.T) {
	api := lookup(t, "image-info")
	params, err := api.ValidateJSON(map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		format string
		w, h   int
	}{
		{"png", 3, 2},
		{"png", 640, 1},
		{"jpeg", 5, 4},
		{"jpeg", 33, 17},
		{"gif", 7, 6},
		{"gif", 1, 1},
	} {
		t.Run(tt.format+" "+strconv.Itoa(tt.w)+"x"+strconv.Itoa(tt.h), func(t *testing.T) {
			data := encodeImage(t, tt.format, tt.w, tt.h)
			m, err := serve(t.Context(), t, api, params, &catalog.File{Name: "img", Data: data, ContentType: http.DetectContentType(data)})
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]any{"format": tt.format, "width": tt.w, "height": tt.h, "bytes": len(data)}
			if !reflect.DeepEqual(m, want) {
				t.Errorf("result %v, want %v", m, want)
			}
		})
	}

	valid := encodeImage(t, "png", 4, 4)
	for _, tt := range []struct {
		name string
		data []byte
	}{
		{"corrupt PNG header", append([]byte("\x89PNG\r\n\x1a\n"), []byte("\x00\x00\x00\x0dIHDX garbage garbage")...)},
		{"PNG signature only", []byte("\x89PNG\r\n\x1a\n")},
		{"truncated PNG", valid[:20]},
		{"broken GIF", []byte("GIF89a\x01")},
		{"not an image", []byte("hello, world")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := serve(t.Context(), t, api, params, &catalog.File{Data: tt.data})
			var rej *catalog.RejectError
			if !errors.As(err, &rej) || !strings.Contains(rej.Message, "cannot be decoded") {
				t.Errorf("err %v, want a RejectError", err)
			}
		})
	}
}
