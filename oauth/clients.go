package oauth

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/tollgate-dev/tollgate/internal/safefetch"
	"github.com/tollgate-dev/tollgate/store"
)

// Client metadata documents are cached this long, and at most this many.
const (
	documentTTL  = 5 * time.Minute
	maxDocuments = 256
)

// A clientInfo is a client as the authorization endpoint knows it: registered, or
// described by a client metadata document.
type clientInfo struct {
	id           string
	name         string
	redirectURIs []string
	// document reports a client whose id is the https URL of its metadata document,
	// so that its host is vouched for by TLS.
	document bool
}

// errClientRefused is wrapped by the errors of client for a client_id that names no
// usable client; their messages are shown on the consent page.
var errClientRefused = errors.New("client refused")

func refuseClient(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errClientRefused}, args...)...)
}

// client returns the client with the given id: a registered client, or for an https
// URL the client its metadata document describes. Errors wrap errClientRefused, or
// report that the store cannot be read.
func (s *Server) client(ctx context.Context, id string) (clientInfo, error) {
	if id == "" {
		return clientInfo{}, refuseClient("the request has no client_id")
	}
	if strings.HasPrefix(id, "https://") || strings.HasPrefix(id, "http://") {
		return s.documentClient(ctx, id)
	}
	if !secretShaped(id, clientPrefix) {
		return clientInfo{}, refuseClient("the client_id %q is not one this server issued", truncate(id, 80))
	}
	c, err := s.store.Client(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return clientInfo{}, refuseClient("the client %q is not registered here (or was removed after a long time unused); the application should register again", id)
	}
	if err != nil {
		return clientInfo{}, err
	}
	return clientInfo{id: c.ID, name: c.Name, redirectURIs: c.RedirectURIs}, nil
}

// documentClient returns the client described by the client metadata document at id
// (draft-ietf-oauth-client-id-metadata-document), fetching it with the SSRF-safe
// fetcher unless a fresh copy is cached.
func (s *Server) documentClient(ctx context.Context, id string) (clientInfo, error) {
	if err := checkDocumentURL(id); err != nil {
		return clientInfo{}, err
	}
	if u, _ := url.Parse(id); hostPort(u) == hostPort(s.issuerURL) {
		// The consent page names the host a document is published at: this server's
		// own would read as the service vouching for the client.
		return clientInfo{}, refuseClient("the client_id URL %q is on this server's own origin; a client publishes its metadata document on a site of its own", truncate(id, 100))
	}
	now := s.now()
	if c, ok := s.documents.get(id, now); ok {
		return c, nil
	}
	f, err := s.fetcher.Fetch(ctx, id, maxDocumentBytes)
	if err != nil {
		var fe *safefetch.Error
		if errors.As(err, &fe) && fe.Reason == safefetch.ReasonCanceled {
			return clientInfo{}, err
		}
		s.log.LogAttrs(ctx, slog.LevelInfo, "oauth: client metadata document refused", slog.String("client_id", id), slog.Any("error", err))
		return clientInfo{}, refuseClient("the client's metadata document could not be fetched: %v", err)
	}
	c, err := parseDocument(id, f.Data)
	if err != nil {
		return clientInfo{}, err
	}
	s.documents.put(id, c, now)
	return c, nil
}

// parseDocument returns the client that the metadata document data, fetched from id,
// describes. Its errors wrap errClientRefused.
func parseDocument(id string, data []byte) (clientInfo, error) {
	var m metadata
	if err := decodeJSON(bytes.NewReader(data), &m); err != nil {
		return clientInfo{}, refuseClient("the client's metadata document at %q is not a JSON object", truncate(id, 100))
	}
	if m.ClientID != id {
		return clientInfo{}, refuseClient("the client's metadata document at %q names another client_id, %q", truncate(id, 100), truncate(m.ClientID, 100))
	}
	if err := m.validate(true); err != nil {
		return clientInfo{}, refuseClient("the client's metadata document is not valid: %v", err)
	}
	return clientInfo{id: id, name: m.ClientName, redirectURIs: m.RedirectURIs, document: true}, nil
}

// checkDocumentURL checks that a client_id is a URL a metadata document may be
// fetched from: https, with a path, without credentials, a fragment or dot segments,
// and written in printable ASCII (see uriText), since the consent page shows it.
func checkDocumentURL(id string) error {
	if len(id) > maxURI {
		return refuseClient("the client_id URL is longer than %d bytes", maxURI)
	}
	if !uriText(id) {
		return refuseClient("the client_id URL %q has characters that must be percent-encoded (a host in punycode)", truncate(id, 100))
	}
	u, err := url.Parse(id)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.Opaque != "" {
		return refuseClient("the client_id %q is not an https URL", truncate(id, 100))
	}
	if u.User != nil || u.Fragment != "" || strings.Contains(id, "#") {
		return refuseClient("the client_id URL %q may have neither credentials nor a fragment", truncate(id, 100))
	}
	if u.Path == "" || u.Path == "/" {
		return refuseClient("the client_id URL %q has no path", truncate(id, 100))
	}
	for _, seg := range strings.Split(u.Path, "/") {
		if seg == "." || seg == ".." {
			return refuseClient("the client_id URL %q has a dot segment", truncate(id, 100))
		}
	}
	return nil
}

// hostPort returns the host of u in lowercase, with its port unless it is the
// scheme's default.
func hostPort(u *url.URL) string {
	host := strings.ToLower(u.Host)
	switch u.Scheme {
	case "https":
		return strings.TrimSuffix(host, ":443")
	case "http":
		return strings.TrimSuffix(host, ":80")
	}
	return host
}

// documentCache keeps recently fetched client metadata documents.
type documentCache struct {
	mu      sync.Mutex
	entries map[string]documentEntry
}

type documentEntry struct {
	client  clientInfo
	expires time.Time
}

// get returns the cached client of the document at id, if it is fresh at now.
func (c *documentCache) get(id string, now time.Time) (clientInfo, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok || !now.Before(e.expires) {
		return clientInfo{}, false
	}
	return e.client, true
}

// put caches the client of a document fetched at now. A full cache first drops the
// expired entries, then any one.
func (c *documentCache) put(id string, client clientInfo, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxDocuments {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		for k := range c.entries {
			if len(c.entries) < maxDocuments {
				break
			}
			delete(c.entries, k)
		}
	}
	c.entries[id] = documentEntry{client, now.Add(documentTTL)}
}
