// Package apis is the sample catalog: six small, real APIs that exercise every part of
// Tollgate (GET and POST, enums, defaults, ranges, formats, odd result field names, a
// slow call, a file API). Their ids, parameters, costs and result fields are part of the
// project's public contract: tests, documents and generated clients rely on them.
package apis

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
	"fmt"
	"hash"
	"image"
	_ "image/gif" // register the decoders image-info reads
	_ "image/jpeg"
	_ "image/png"
	"net/http"
	"time"

	"github.com/google/uuid"

	"github.com/tollgate-dev/tollgate/catalog"
)

// All returns the definitions of the sample catalog, in the order of the documentation.
func All() []catalog.API {
	return []catalog.API{Hash(), HMAC(), UUIDGenerator(), DateInfo(), Echo(), ImageInfo()}
}

// Register adds the sample catalog to a registry.
func Register(r *catalog.Registry) error {
	for _, a := range All() {
		if err := r.Register(a); err != nil {
			return err
		}
	}
	return nil
}

var hashes = map[string]func() hash.Hash{
	"md5": md5.New, "sha1": sha1.New, "sha256": sha256.New, "sha512": sha512.New,
}

// Hash is the "hash" API: the hex digest of a text.
func Hash() catalog.API {
	return catalog.API{
		ID: "hash", Title: "Hash", Category: "Security",
		Description: "Computes the cryptographic hash of a text and returns it in hexadecimal.",
		Method:      http.MethodGet, Cost: 1,
		Params: []catalog.Param{
			{Name: "text", Type: catalog.String, Required: true, MaxLength: catalog.Len(10000),
				Description: "The text to hash.", Example: "hello"},
			{Name: "algorithm", Type: catalog.String, Enum: []any{"md5", "sha1", "sha256", "sha512"},
				Default: "sha256", Description: "The hash function."},
		},
		Result: []catalog.Field{
			{Name: "algorithm", Type: catalog.String, Description: "The hash function used."},
			{Name: "hash", Type: catalog.String, Description: "The digest in lowercase hexadecimal."},
		},
		Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
			alg, text := req.Params.String("algorithm"), []byte(req.Params.String("text"))
			var sum []byte
			switch alg {
			case "md5":
				s := md5.Sum(text)
				sum = s[:]
			case "sha1":
				s := sha1.Sum(text)
				sum = s[:]
			case "sha512":
				s := sha512.Sum512(text)
				sum = s[:]
			default:
				s := sha256.Sum256(text)
				sum = s[:]
			}
			return map[string]any{"algorithm": alg, "hash": hex.EncodeToString(sum)}, nil
		}),
	}
}

// HMAC is the "hmac" API: a keyed message authentication code.
func HMAC() catalog.API {
	return catalog.API{
		ID: "hmac", Title: "HMAC", Category: "Security",
		Description: "Computes the HMAC of a message with a secret key.",
		Method:      http.MethodPost, Cost: 1,
		Params: []catalog.Param{
			{Name: "message", Type: catalog.String, Required: true, Description: "The message to authenticate.", Example: "hello"},
			{Name: "secret", Type: catalog.String, Required: true, MinLength: catalog.Len(1), Description: "The secret key.", Example: "key"},
			{Name: "algorithm", Type: catalog.String, Enum: []any{"sha1", "sha256", "sha512"}, Default: "sha256", Description: "The hash function."},
			{Name: "encoding", Type: catalog.String, Enum: []any{"hex", "base64"}, Default: "hex", Description: "The encoding of the result."},
		},
		Result: []catalog.Field{
			{Name: "hmac", Type: catalog.String, Description: "The authentication code."},
			{Name: "algorithm", Type: catalog.String, Description: "The hash function used."},
			{Name: "encoding", Type: catalog.String, Description: "The encoding of hmac."},
		},
		Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
			alg, enc := req.Params.String("algorithm"), req.Params.String("encoding")
			m := hmac.New(hashes[alg], []byte(req.Params.String("secret")))
			m.Write([]byte(req.Params.String("message")))
			sum := m.Sum(nil)
			out := hex.EncodeToString(sum)
			if enc == "base64" {
				out = base64.StdEncoding.EncodeToString(sum)
			}
			return map[string]any{"hmac": out, "algorithm": alg, "encoding": enc}, nil
		}),
	}
}

// UUIDGenerator is the "uuid-generator" API: random version 4 UUIDs.
func UUIDGenerator() catalog.API {
	return catalog.API{
		ID: "uuid-generator", Title: "UUID generator", Category: "Data generation",
		Description: "Generates random (version 4) UUIDs.",
		Method:      http.MethodGet, Cost: 1,
		Params: []catalog.Param{
			{Name: "count", Type: catalog.Integer, Min: catalog.Num(1), Max: catalog.Num(100), Default: 1,
				Description: "How many UUIDs to generate."},
		},
		Result: []catalog.Field{
			{Name: "uuids", Type: catalog.Array, Items: &catalog.Field{Type: catalog.String}, Description: "The UUIDs."},
			{Name: "count", Type: catalog.Integer, Description: "How many were generated."},
		},
		Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
			n := req.Params.Int("count")
			ids := make([]string, n)
			for i := range ids {
				ids[i] = uuid.NewString()
			}
			return map[string]any{"uuids": ids, "count": n}, nil
		}),
	}
}

// DateInfo is the "date-info" API: facts about a calendar date. Its result field names
// exercise the GraphQL naming rules.
func DateInfo() catalog.API {
	return catalog.API{
		ID: "date-info", Title: "Date info", Category: "Date and time",
		Description: "Returns facts about a calendar date: weekday, ISO week, Unix time, quarter, first day of its month and whether its year is a leap year.",
		Method:      http.MethodGet, Cost: 1,
		Params: []catalog.Param{
			{Name: "date", Type: catalog.String, Format: catalog.FormatDate, Required: true,
				Description: "The date, as YYYY-MM-DD.", Example: "2024-02-29"},
		},
		Result: []catalog.Field{
			{Name: "date", Type: catalog.String, Description: "The date, as given."},
			{Name: "day-of-week", Type: catalog.String, Description: "The English name of the weekday."},
			{Name: "iso:week", Type: catalog.Integer, Description: "The ISO 8601 week number."},
			{Name: "unix.seconds", Type: catalog.Integer, Description: "Seconds since the Unix epoch at midnight UTC."},
			{Name: "quarter/year", Type: catalog.String, Description: "The quarter and year, like Q1/2024."},
			{Name: "1st-of-month", Type: catalog.String, Description: "The first day of the date's month."},
			{Name: "is leap year", Type: catalog.Boolean, Description: "Whether the date's year is a leap year."},
		},
		Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
			s := req.Params.String("date")
			d, err := time.Parse(time.DateOnly, s)
			if err != nil {
				return nil, catalog.Reject("date %q does not exist", s)
			}
			_, week := d.ISOWeek()
			y := d.Year()
			return map[string]any{
				"date":         s,
				"day-of-week":  d.Weekday().String(),
				"iso:week":     week,
				"unix.seconds": d.Unix(),
				"quarter/year": fmt.Sprintf("Q%d/%d", (int(d.Month())-1)/3+1, y),
				"1st-of-month": time.Date(y, d.Month(), 1, 0, 0, 0, 0, time.UTC).Format(time.DateOnly),
				"is leap year": y%4 == 0 && (y%100 != 0 || y%400 == 0),
			}, nil
		}),
	}
}

// Echo is the "echo" API: returns its message, optionally after a delay, for testing
// clients, timeouts and parallel execution.
func Echo() catalog.API {
	return catalog.API{
		ID: "echo", Title: "Echo", Category: "Testing",
		Description: "Returns the message it is given, after an optional delay.",
		Method:      http.MethodPost, Cost: 1,
		Params: []catalog.Param{
			{Name: "message", Type: catalog.String, Required: true, MaxLength: catalog.Len(1000),
				Description: "The message to return.", Example: "hello"},
			{Name: "delay_ms", Type: catalog.Integer, Min: catalog.Num(0), Max: catalog.Num(5000), Default: 0,
				Description: "Milliseconds to wait before answering."},
		},
		Result: []catalog.Field{
			{Name: "message", Type: catalog.String, Description: "The message."},
			{Name: "delay_ms", Type: catalog.Integer, Description: "The delay applied."},
		},
		Handler: catalog.HandlerFunc(func(ctx context.Context, req *catalog.Request) (any, error) {
			delay := req.Params.Int("delay_ms")
			if delay > 0 {
				t := time.NewTimer(time.Duration(delay) * time.Millisecond)
				defer t.Stop()
				select {
				case <-t.C:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return map[string]any{"message": req.Params.String("message"), "delay_ms": delay}, nil
		}),
	}
}

// ImageInfo is the "image-info" API, a file API: the format and size of an image.
func ImageInfo() catalog.API {
	return catalog.API{
		ID: "image-info", Title: "Image info", Category: "Images",
		Description: "Reads the format and dimensions of a PNG, JPEG or GIF image.",
		Method:      http.MethodPost, Cost: 2,
		File: &catalog.FileField{Name: "image", Types: []string{"image/png", "image/jpeg", "image/gif"},
			MaxBytes: 5 << 20, Description: "The image: PNG, JPEG or GIF, at most 5 MiB."},
		Result: []catalog.Field{
			{Name: "format", Type: catalog.String, Description: "png, jpeg or gif."},
			{Name: "width", Type: catalog.Integer, Description: "Width in pixels."},
			{Name: "height", Type: catalog.Integer, Description: "Height in pixels."},
			{Name: "bytes", Type: catalog.Integer, Description: "The file size."},
		},
		Handler: catalog.HandlerFunc(func(_ context.Context, req *catalog.Request) (any, error) {
			cfg, format, err := image.DecodeConfig(bytes.NewReader(req.File.Data))
			if err != nil {
				return nil, catalog.Reject("the image cannot be decoded: %v", err)
			}
			return map[string]any{"format": format, "width": cfg.Width, "height": cfg.Height, "bytes": len(req.File.Data)}, nil
		}),
	}
}
