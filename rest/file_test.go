package rest_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/wire"
)

// TestImageUpload proves the file API over multipart: real PNG, JPEG and GIF uploads
// give their format, size and byte count for 2 credits; every malformed upload is
// refused with the right status and a message saying why, and is not charged.
func TestImageUpload(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro")
	remaining := int64(100000)

	for _, c := range []struct {
		format        string
		data          []byte
		width, height int
	}{
		{"png", pngImage(t, 3, 4), 3, 4},
		{"jpeg", jpegImage(t, 5, 6), 5, 6},
		{"gif", gifImage(t, 7, 8), 7, 8},
	} {
		t.Run(c.format, func(t *testing.T) {
			body, ct := multipartBody(t, formPart{"image", "picture." + c.format, c.data})
			r := h.do(t, http.MethodPost, "/v1/image-info", body, key(acct.Key), contentType(ct))
			d := wantOK(t, r)
			want := map[string]string{"format": c.format, "width": fmt.Sprint(c.width), "height": fmt.Sprint(c.height), "bytes": fmt.Sprint(len(c.data))}
			for k, v := range want {
				if got := fmt.Sprint(d[k]); got != v {
					t.Errorf("%s = %s, want %s", k, got, v)
				}
			}
			remaining -= 2
			if r.Int(wire.HeaderCreditsCost) != 2 || r.Int(wire.HeaderCreditsRemaining) != remaining {
				t.Errorf("cost %d remaining %d, want 2 and %d", r.Int(wire.HeaderCreditsCost), r.Int(wire.HeaderCreditsRemaining), remaining)
			}
		})
	}

	png := pngImage(t, 2, 2)
	huge := make([]byte, 5<<20+1)
	copy(huge, png)
	garbledPNG := append(append([]byte{}, png[:16]...), bytes.Repeat([]byte{0xff}, 64)...)
	multipartCT := func(parts ...formPart) (string, string) {
		b, ct := multipartBody(t, parts...)
		return b.String(), ct
	}
	cases := []struct {
		name      string
		body      func() (string, string)
		path      string
		status    int
		code      string
		fragments []string
		cost      int64
	}{
		{"file over 5 MiB", func() (string, string) { return multipartCT(formPart{"image", "big.png", huge}) },
			"/v1/image-info", 413, "body_too_large", []string{"5242880 bytes"}, 0},
		{"text file", func() (string, string) {
			return multipartCT(formPart{"image", "notes.png", []byte("just some text, named like an image")})
		}, "/v1/image-info", 400, "invalid_input", []string{"text/plain", "image/png, image/jpeg or image/gif"}, 0},
		{"empty file", func() (string, string) { return multipartCT(formPart{"image", "empty.png", nil}) },
			"/v1/image-info", 400, "invalid_input", []string{"empty"}, 0},
		{"no file and no url (multipart)", func() (string, string) { return multipartCT() },
			"/v1/image-info", 400, "invalid_input", []string{"needs a file", "image field", "url"}, 0},
		{"no file and no url (JSON)", func() (string, string) { return "{}", "application/json" },
			"/v1/image-info", 400, "invalid_input", []string{"needs a file", "multipart/form-data", "url"}, 0},
		{"file and url", func() (string, string) {
			return multipartCT(formPart{"image", "a.png", png}, formPart{field: "url", data: []byte("https://example.com/a.png")})
		}, "/v1/image-info", 400, "invalid_input", []string{"either a file", "or a url, not both"}, 0},
		{"file in the wrong field", func() (string, string) { return multipartCT(formPart{"photo", "a.png", png}) },
			"/v1/image-info", 400, "invalid_input", []string{`"photo"`, `"image"`}, 0},
		{"two files", func() (string, string) {
			return multipartCT(formPart{"image", "a.png", png}, formPart{"image", "b.png", png})
		}, "/v1/image-info", 400, "invalid_input", []string{"one file"}, 0},
		{"unknown text field", func() (string, string) {
			return multipartCT(formPart{"image", "a.png", png}, formPart{field: "caption", data: []byte("x")})
		}, "/v1/image-info", 400, "invalid_input", []string{`"caption"`, "unknown"}, 0},
		{"broken multipart", func() (string, string) { return "--b\r\nno headers end", "multipart/form-data; boundary=b" },
			"/v1/image-info", 400, "invalid_input", []string{"multipart"}, 0},
		{"multipart without boundary", func() (string, string) { return "x", "multipart/form-data" },
			"/v1/image-info", 400, "invalid_input", []string{"multipart"}, 0},
		{"file to a non-file API", func() (string, string) { return multipartCT(formPart{"image", "a.png", png}) },
			"/v1/echo", 415, "unsupported_media_type", []string{"echo", "takes no file"}, 0},
		{"image/png Content-Type for the raw bytes", func() (string, string) { return string(png), "image/png" },
			"/v1/image-info", 415, "unsupported_media_type", []string{"image/png", "multipart/form-data"}, 0},
		// A file of an accepted type that the API cannot decode is a wrong value judged
		// by the API: 400 rejected, and charged.
		{"undecodable PNG", func() (string, string) { return multipartCT(formPart{"image", "bad.png", garbledPNG}) },
			"/v1/image-info", 400, "rejected", []string{"cannot be decoded"}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body, ct := c.body()
			r := h.do(t, http.MethodPost, c.path, strings.NewReader(body), key(acct.Key), contentType(ct))
			wantError(t, r, c.status, c.code, c.fragments...)
			remaining -= c.cost
			if r.Int(wire.HeaderCreditsCost) != c.cost {
				t.Errorf("X-Credits-Cost = %d, want %d", r.Int(wire.HeaderCreditsCost), c.cost)
			}
			if b := h.balance(t, acct.ID); b.Remaining != remaining {
				t.Errorf("balance %d, want %d", b.Remaining, remaining)
			}
		})
	}
}

// imageServer serves a PNG at /ok.png, a text file at /notes.txt, a JPEG behind a
// redirect at /moved, and 404 elsewhere. It counts the requests it receives.
func imageServer(t *testing.T, png, jpg []byte) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		switch r.URL.Path {
		case "/ok.png":
			w.Header().Set("Content-Type", "image/png")
			w.Write(png)
		case "/moved":
			http.Redirect(w, r, "/photo.jpg", http.StatusFound)
		case "/photo.jpg":
			w.Write(jpg)
		case "/notes.txt":
			w.Header().Set("Content-Type", "image/png") // lies; the content decides
			w.Write([]byte("not an image at all"))
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &hits
}

// TestImageURL proves the URL form of the file API: with private fetches allowed, a
// served PNG (and a redirected JPEG) is read and charged; a fetch answered 404 or
// returning a file of the wrong type is a 400 and refunded. Each case runs on an
// account of its own.
func TestImageURL(t *testing.T) {
	h := newHarness(t, config{svc: tollgate.Options{Fetch: tollgate.FetchOptions{AllowPrivate: true}}})
	png, jpg := pngImage(t, 9, 10), jpegImage(t, 11, 12)
	img, hits := imageServer(t, png, jpg)
	const allowance = 100000

	send := func(t *testing.T, k, form, url string) *response {
		switch form {
		case "json":
			b, _ := json.Marshal(map[string]string{"url": url})
			return h.do(t, http.MethodPost, "/v1/image-info", bytes.NewReader(b), key(k), jsonType)
		case "multipart":
			b, ct := multipartBody(t, formPart{field: "url", data: []byte(url)})
			return h.do(t, http.MethodPost, "/v1/image-info", b, key(k), contentType(ct))
		default:
			return h.do(t, http.MethodPost, "/v1/image-info", strings.NewReader("url="+url), key(k), contentType("application/x-www-form-urlencoded"))
		}
	}
	// charged checks the cost of the answer r to acct's only call, its balance and its
	// usage: 2 credits and one call counted, or nothing for a refunded call.
	charged := func(t *testing.T, acct account, r *response, paid bool) {
		t.Helper()
		cost, calls := int64(0), int64(0)
		if paid {
			cost, calls = 2, 1
		}
		if r.Int(wire.HeaderCreditsCost) != cost || r.Int(wire.HeaderCreditsRemaining) != allowance-cost {
			t.Errorf("cost %d remaining %d, want %d and %d", r.Int(wire.HeaderCreditsCost), r.Int(wire.HeaderCreditsRemaining), cost, allowance-cost)
		}
		if b := h.balance(t, acct.ID); b.Remaining != allowance-cost || b.Used != cost {
			t.Errorf("balance %+v, want %d remaining and %d used", b, allowance-cost, cost)
		}
		if a := h.analytics(t, key(acct.Key)); a.Calls["image-info"] != calls {
			t.Errorf("image-info counted %d times, want %d (a refunded call does not count)", a.Calls["image-info"], calls)
		}
	}
	for _, form := range []string{"json", "multipart", "form"} {
		t.Run("png/"+form, func(t *testing.T) {
			acct := h.newAccount(t, "pro")
			r := send(t, acct.Key, form, img.URL+"/ok.png")
			d := wantOK(t, r)
			if d["format"] != "png" || fmt.Sprint(d["width"]) != "9" || fmt.Sprint(d["height"]) != "10" || fmt.Sprint(d["bytes"]) != fmt.Sprint(len(png)) {
				t.Errorf("data %v", d)
			}
			charged(t, acct, r, true)
		})
	}
	t.Run("redirect", func(t *testing.T) {
		acct := h.newAccount(t, "pro")
		r := send(t, acct.Key, "json", img.URL+"/moved")
		d := wantOK(t, r)
		if d["format"] != "jpeg" || fmt.Sprint(d["width"]) != "11" {
			t.Errorf("data %v", d)
		}
		charged(t, acct, r, true)
	})
	for _, c := range []struct {
		name, path string
		fragments  []string
	}{
		{"404", "/missing.png", []string{"404", "check that the url is right"}},
		{"wrong type", "/notes.txt", []string{"text/plain", "image/png, image/jpeg or image/gif"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			acct := h.newAccount(t, "pro")
			before := hits.Load()
			r := send(t, acct.Key, "json", img.URL+c.path)
			wantError(t, r, http.StatusBadRequest, "invalid_input", c.fragments...)
			if hits.Load() == before {
				t.Error("the file was never fetched")
			}
			charged(t, acct, r, false)
		})
	}
}

// TestImageURLRefusesSSRF proves that, with the default fetch options, a URL that points
// at a loopback, private, link-local or otherwise unfetchable address, or that uses
// another scheme or carries credentials, is refused with 400 invalid_input saying why,
// before anything is charged and without any request reaching the target.
func TestImageURLRefusesSSRF(t *testing.T) {
	h := newHarness(t, config{})
	acct := h.newAccount(t, "pro")
	img, hits := imageServer(t, pngImage(t, 1, 1), nil)
	port := img.URL[strings.LastIndexByte(img.URL, ':')+1:]
	before := h.balance(t, acct.ID)
	for _, c := range []struct {
		url       string
		fragments []string
	}{
		{img.URL + "/ok.png", []string{"127.0.0.1", "loopback", "only public internet addresses"}},
		{"http://127.0.0.1:" + port + "/x.png", []string{"127.0.0.1", "loopback", "only public internet addresses"}},
		// A host name is not told why: that would tell outsiders which internal names
		// exist (see internal/safefetch).
		{"http://localhost:" + port + "/", []string{`"localhost"`, "cannot be fetched from", "only from hosts with public internet addresses"}},
		{"http://10.0.0.1/x", []string{"10.0.0.1", "private", "only public internet addresses"}},
		{"http://192.168.0.1/x", []string{"192.168.0.1", "private", "only public internet addresses"}},
		{"http://169.254.169.254/latest/meta-data/", []string{"169.254.169.254", "metadata", "only public internet addresses"}},
		{"http://[::1]/", []string{"::1", "loopback", "only public internet addresses"}},
		{"http://[::ffff:127.0.0.1]:" + port + "/", []string{"loopback", "only public internet addresses"}},
		{"http://0.0.0.0:" + port + "/", []string{"unspecified", "only public internet addresses"}},
		{"ftp://example.com/x", []string{`"url"`, "http"}},
		{"file:///etc/passwd", []string{`"url"`, "http"}},
		{"http://user:pass@example.com/x", []string{"user name or password"}},
	} {
		t.Run(c.url, func(t *testing.T) {
			b, _ := json.Marshal(map[string]string{"url": c.url})
			r := h.do(t, http.MethodPost, "/v1/image-info", bytes.NewReader(b), key(acct.Key), jsonType)
			wantError(t, r, http.StatusBadRequest, "invalid_input", c.fragments...)
			if strings.Contains(r.Error, "user:pass") {
				t.Errorf("the message repeats the URL's credentials: %q", r.Error)
			}
		})
	}
	if hits.Load() != 0 {
		t.Errorf("the local server received %d requests", hits.Load())
	}
	if after := h.balance(t, acct.ID); after != before {
		t.Errorf("the refusals changed the balance from %+v to %+v", before, after)
	}
}
