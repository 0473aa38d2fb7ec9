package clientgen

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/client"
)

// firstVersion is the version of a package generated for the first time.
const firstVersion = "1.0.0"

// metaFile is the file in each generated package that records the definition and the
// version the package was generated from, so that the next generation can tell what
// changed and bump the version as semver says.
const metaFile = "api.json"

// meta is the content of metaFile.
type meta struct {
	// Version is the package's version.
	Version string `json:"version"`
	// API is the definition the package was generated from.
	API *catalog.API `json:"api"`
}

// encodeMeta returns the metaFile of a package. The definition is the catalog's public
// form without the JSON Schemas, which derive from it.
func encodeMeta(api *catalog.API, version string) ([]byte, error) {
	type plain catalog.API // without MarshalJSON, so without the schemas
	b, err := json.MarshalIndent(struct {
		Version string `json:"version"`
		API     *plain `json:"api"`
	}{version, (*plain)(api)}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// readMeta reads the metaFile of a package generated earlier. It returns nil when
// there is none.
func readMeta(path string) (*meta, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m struct {
		Version string          `json:"version"`
		API     json.RawMessage `json:"api"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	defs, err := client.DecodeCatalog(bytes.NewReader([]byte(`{"apis":[`+string(m.API)+`]}`)), int64(len(b))+16)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	api, err := catalog.Compile(defs[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := parseSemver(m.Version); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &meta{Version: m.Version, API: api}, nil
}

// A change is how a new definition differs from the one a package was generated from,
// in the terms of semantic versioning as the packages use it: a minor version adds
// optional parameters or result fields, and existing request and response shapes never
// change.
type change int

const (
	unchanged change = iota
	patch            // documentation, title, cost: no shape changed
	minor            // optional parameters or result fields were added
	major            // a shape changed: anything else
)

// nextVersion returns the version of a package generated from api, given what it was
// generated from before (nil for a new package).
func nextVersion(prev *meta, api *catalog.API) (string, error) {
	if prev == nil {
		return firstVersion, nil
	}
	v, err := parseSemver(prev.Version)
	if err != nil {
		return "", err
	}
	switch compare(prev.API, api) {
	case patch:
		v[2]++
	case minor:
		v[1], v[2] = v[1]+1, 0
	case major:
		v = [3]int{v[0] + 1, 0, 0}
	}
	return fmt.Sprintf("%d.%d.%d", v[0], v[1], v[2]), nil
}

// compare classifies the change from old to new.
func compare(old, new *catalog.API) change {
	a, _ := encodeMeta(old, "")
	b, _ := encodeMeta(new, "")
	if bytes.Equal(a, b) {
		return unchanged
	}
	if old.Method != new.Method || !reflect.DeepEqual(shapeOfFile(old.File), shapeOfFile(new.File)) {
		return major
	}
	c := patch
	oldParams := paramShapes(old.Params)
	for name, p := range paramShapes(new.Params) {
		o, ok := oldParams[name]
		switch {
		case !ok && p.Required:
			return major
		case !ok:
			c = minor
		case !reflect.DeepEqual(o, p):
			return major
		}
		delete(oldParams, name)
	}
	if len(oldParams) > 0 { // a parameter was removed
		return major
	}
	oldFields, newFields := fieldShapes(old.Result, ""), fieldShapes(new.Result, "")
	for name, t := range oldFields {
		if newFields[name] != t {
			return major // removed, or its type changed
		}
	}
	if len(newFields) > len(oldFields) {
		c = minor
	}
	return c
}

// paramShapes returns the parameters by name, without their documentation.
func paramShapes(ps []catalog.Param) map[string]catalog.Param {
	out := make(map[string]catalog.Param, len(ps))
	for _, p := range ps {
		out[p.Name] = stripDocs(p)
	}
	return out
}

func stripDocs(p catalog.Param) catalog.Param {
	p.Description, p.Example = "", nil
	if p.Items != nil {
		items := stripDocs(*p.Items)
		p.Items = &items
	}
	if p.Fields != nil {
		fs := make([]catalog.Param, len(p.Fields))
		for i, f := range p.Fields {
			fs[i] = stripDocs(f)
		}
		p.Fields = fs
	}
	return p
}

// fieldShapes returns the type of every result field by its path.
func fieldShapes(fs []catalog.Field, prefix string) map[string]catalog.Type {
	out := map[string]catalog.Type{}
	for _, f := range fs {
		path := prefix + f.Name
		out[path] = f.Type
		maps.Copy(out, fieldShapes(f.Fields, path+"."))
		if f.Items != nil {
			maps.Copy(out, fieldShapes([]catalog.Field{*f.Items}, path+"[]"))
		}
	}
	return out
}

func shapeOfFile(f *catalog.FileField) *catalog.FileField {
	if f == nil {
		return nil
	}
	s := *f
	s.Description = ""
	return &s
}

// parseSemver reads MAJOR.MINOR.PATCH.
func parseSemver(s string) ([3]int, error) {
	var v [3]int
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return v, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", s)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || (len(p) > 1 && p[0] == '0') {
			return v, fmt.Errorf("version %q is not MAJOR.MINOR.PATCH", s)
		}
		v[i] = n
	}
	return v, nil
}
