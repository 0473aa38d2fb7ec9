package dashboard

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/base64"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"slices"
	"strings"
	"sync"
	"time"
)

// An assetServer serves the embedded style sheets and scripts. Each answer carries a
// strong ETag of the file's content and Cache-Control: no-cache, so that a browser
// keeps the file and asks again with If-None-Match (304 while the file is the same,
// which it stays until the binary changes). Text files are sent gzip-compressed to a
// browser that accepts it, compressed once, on the first request that wants them.
type assetServer struct {
	files map[string]*asset
}

// An asset is one embedded file, read and compressed when it is first asked for.
type asset struct {
	fsys fs.FS
	name string
	once sync.Once
	body []byte
	gz   []byte // nil when compressing does not pay
	etag string
	err  error
}

// newAssetServer serves the files of fsys.
func newAssetServer(fsys fs.FS) (*assetServer, error) {
	s := &assetServer{files: map[string]*asset{}}
	err := fs.WalkDir(fsys, ".", func(name string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			s.files[name] = &asset{fsys: fsys, name: name}
		}
		return err
	})
	return s, err
}

// compressible lists the extensions of the files worth compressing.
var compressible = []string{".css", ".js", ".json", ".svg", ".txt"}

// load reads the file, computes its ETag and, for a text file, its gzip form.
func (a *asset) load() {
	a.body, a.err = fs.ReadFile(a.fsys, a.name)
	if a.err != nil {
		return
	}
	sum := sha256.Sum256(a.body)
	a.etag = base64.RawURLEncoding.EncodeToString(sum[:16])
	if len(a.body) < 1024 || !slices.Contains(compressible, path.Ext(a.name)) {
		return
	}
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // a valid level: no error
	zw.Write(a.body)
	zw.Close()
	if buf.Len() < len(a.body) {
		a.gz = buf.Bytes()
	}
}

// ServeHTTP serves the file the request's path names (relative to the assets).
func (s *assetServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a, ok := s.files[strings.TrimPrefix(r.URL.Path, "/")]
	if !ok {
		http.NotFound(w, r)
		return
	}
	a.once.Do(a.load)
	if a.err != nil {
		http.Error(w, "internal error: the file cannot be read", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", mime.TypeByExtension(path.Ext(a.name)))
	h.Set("Cache-Control", "no-cache")
	h.Add("Vary", "Accept-Encoding")
	body, etag := a.body, a.etag
	if a.gz != nil && acceptsGzip(r) {
		h.Set("Content-Encoding", "gzip")
		body, etag = a.gz, etag+"-gzip"
	}
	h.Set("ETag", `"`+etag+`"`)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(body))
}

// acceptsGzip reports whether the request's Accept-Encoding takes gzip (and does not
// refuse it with q=0).
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for item := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(item), ";")
			if strings.EqualFold(strings.TrimSpace(coding), "gzip") {
				q := strings.ReplaceAll(params, " ", "")
				return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
			}
		}
	}
	return false
}
