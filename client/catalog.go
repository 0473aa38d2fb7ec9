package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/tollgate-dev/tollgate/catalog"
)

// ErrUnknownAPI is wrapped by the error a call to an API that is not in the catalog
// returns.
var ErrUnknownAPI = errors.New("client: unknown API")

// A CatalogError reports that the catalog could not be read: the service is not
// reachable at the base URL, or did not answer with a catalog.
type CatalogError struct {
	// URL is the address of the catalog.
	URL string
	// Err is what went wrong.
	Err error
}

// Error says what went wrong and what to check.
func (e *CatalogError) Error() string {
	return fmt.Sprintf("client: cannot read the catalog at %s, which the client validates every call against: %v; check Options.BaseURL, or give the definitions in Options.Catalog", e.URL, e.Err)
}

// Unwrap returns the cause.
func (e *CatalogError) Unwrap() error { return e.Err }

// apiSet is the catalog a Client validates against: given in the options, or fetched
// once. Loads are serialized by sem (a lock that a waiting caller's context can
// abandon); reads take no lock.
type apiSet struct {
	sem  chan struct{}
	snap atomic.Pointer[apiSnapshot]
}

// apiSnapshot is one loaded catalog.
type apiSnapshot struct {
	list   []*catalog.API
	byID   map[string]*catalog.API
	broken map[string]error // definitions this client cannot compile, by id
	source string           // where the catalog came from, for messages
}

func newAPISet() *apiSet { return &apiSet{sem: make(chan struct{}, 1)} }

// compile stores the given definitions as the catalog. A definition that does not
// compile is an error: the caller wrote it.
func (s *apiSet) compile(defs []catalog.API) error {
	snap := &apiSnapshot{byID: make(map[string]*catalog.API, len(defs)), source: "Options.Catalog"}
	for _, d := range defs {
		a, err := catalog.Compile(d)
		if err != nil {
			return fmt.Errorf("client: Options.Catalog: %w", err)
		}
		if _, dup := snap.byID[a.ID]; dup {
			return fmt.Errorf("client: Options.Catalog defines the %s API twice", a.ID)
		}
		snap.byID[a.ID] = a
		snap.list = append(snap.list, a)
	}
	s.snap.Store(snap)
	return nil
}

// API returns the definition of the API apiID, reading the catalog first if the client
// has none yet. It returns an error wrapping [ErrUnknownAPI] when the catalog has no
// such API.
func (c *Client) API(ctx context.Context, apiID string) (*catalog.API, error) {
	snap, err := c.catalog(ctx)
	if err != nil {
		return nil, err
	}
	if a, ok := snap.byID[apiID]; ok {
		return a, nil
	}
	if err := snap.broken[apiID]; err != nil {
		return nil, fmt.Errorf("client: this client cannot read the definition of the %s API in the catalog (%w); update the client", apiID, err)
	}
	return nil, fmt.Errorf("%w %q: the catalog of %s has no such API; GET /v1/catalog lists them", ErrUnknownAPI, apiID, snap.source)
}

// Catalog returns the definitions of every API the client can call, in the order of
// the catalog (the service lists them by id), reading the catalog first if the client
// has none yet. The
// definitions are shared and must not be modified.
func (c *Client) Catalog(ctx context.Context) ([]*catalog.API, error) {
	snap, err := c.catalog(ctx)
	if err != nil {
		return nil, err
	}
	return append([]*catalog.API(nil), snap.list...), nil
}

// catalog returns the loaded catalog, fetching it on first use. A failed fetch is not
// kept: the next call tries again.
func (c *Client) catalog(ctx context.Context) (*apiSnapshot, error) {
	if snap := c.cat.snap.Load(); snap != nil {
		return snap, nil
	}
	select {
	case c.cat.sem <- struct{}{}:
		defer func() { <-c.cat.sem }()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if snap := c.cat.snap.Load(); snap != nil { // loaded while this call waited
		return snap, nil
	}
	snap, err := c.fetchCatalog(ctx)
	if err != nil {
		return nil, err
	}
	c.cat.snap.Store(snap)
	return snap, nil
}

// fetchCatalog reads GET /v1/catalog. It sends no key: the catalog is public.
func (c *Client) fetchCatalog(ctx context.Context) (*apiSnapshot, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	u := c.base + "/v1/catalog"
	fail := func(err error) error { return &CatalogError{URL: u, Err: err} }
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fail(err)
	}
	c.setHeaders(req)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fail(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fail(fmt.Errorf("the service answered %s", resp.Status))
	}
	defs, err := DecodeCatalog(resp.Body, c.maxBody)
	if err != nil {
		return nil, fail(err)
	}
	snap := &apiSnapshot{byID: make(map[string]*catalog.API, len(defs)), broken: map[string]error{}, source: c.base}
	for _, d := range defs {
		a, err := catalog.Compile(d)
		if err != nil {
			snap.broken[d.ID] = err
			continue
		}
		snap.byID[a.ID] = a
		snap.list = append(snap.list, a)
	}
	return snap, nil
}

// DecodeCatalog decodes the answer of GET /v1/catalog, or a saved copy of it: the
// envelope {"status": "ok", "data": {"apis": [...]}}. A bare {"apis": [...]} object is
// accepted too. It reads at most maxBytes bytes (0 means [DefaultMaxResponseBytes]) and
// returns the definitions in the order of the document, without handlers and not
// compiled: pass them to [catalog.Compile] or [Options.Catalog].
func DecodeCatalog(r io.Reader, maxBytes int64) ([]catalog.API, error) {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxResponseBytes
	}
	b, err := io.ReadAll(io.LimitReader(r, maxBytes+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > maxBytes {
		return nil, fmt.Errorf("the catalog is larger than %d bytes", maxBytes)
	}
	var doc struct {
		Status string          `json:"status"`
		Error  *string         `json:"error"`
		Data   json.RawMessage `json:"data"`
		APIs   json.RawMessage `json:"apis"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("the catalog is not a JSON object: %w", err)
	}
	if doc.Status == "error" && doc.Error != nil {
		return nil, fmt.Errorf("the service answered with an error: %s", *doc.Error)
	}
	list := doc.APIs
	if doc.Data != nil {
		var data struct {
			APIs json.RawMessage `json:"apis"`
		}
		if err := json.Unmarshal(doc.Data, &data); err != nil {
			return nil, fmt.Errorf("the catalog's data is not an object: %w", err)
		}
		list = data.APIs
	}
	if list == nil {
		return nil, errors.New(`the document has no "apis" list; it should be the answer of GET /v1/catalog`)
	}
	d := json.NewDecoder(bytes.NewReader(list))
	d.UseNumber() // keep integer defaults and enum values exact
	var defs []catalog.API
	if err := d.Decode(&defs); err != nil {
		return nil, fmt.Errorf("the catalog's apis cannot be decoded: %w", err)
	}
	return defs, nil
}
