package dashboard

import (
	"bytes"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/auth"
	"github.com/tollgate-dev/tollgate/catalog"
	"github.com/tollgate-dev/tollgate/edge"
	"github.com/tollgate-dev/tollgate/internal/clientgen"
	"github.com/tollgate-dev/tollgate/internal/paramdoc"
	"github.com/tollgate-dev/tollgate/wire"
)

// paramPrefix starts the name of each parameter's form field, so that no parameter
// name can collide with the form's own fields (csrf_token).
const paramPrefix = "p."

// maxTextarea is the length from which a string parameter gets a text area rather
// than a one-line input.
const maxTextarea = 200

// An input is one labelled control of the try-it form.
type input struct {
	// Name is the parameter's name, Field the form field's, ID the control's id.
	Name, Field, ID string
	// Kind is the control: text, number, date, email, url, select, checkbox or
	// textarea.
	Kind string
	Type string
	// Rules and Description are the parameter's, for the hint.
	Rules, Description string
	Required           bool
	// Value is what the control holds; Checked for a checkbox.
	Value   string
	Checked bool
	// Min, Max and Step bound a number; MinLength and MaxLength a text ("" for none).
	Min, Max, Step, MinLength, MaxLength string
	// Options are the choices of a select.
	Options []option
}

// option is a choice of a select.
type option struct {
	Value, Label string
	Selected     bool
}

// tryForm is the try-it form of an API.
type tryForm struct {
	Inputs []input
	// File is set for a file API: the upload's field, its accepted types and limit.
	File *fileInfo
}

// newTryForm returns the try-it form of api: one control per parameter (and for a
// file API the url parameter and the upload), filled with a post's values, or for a
// new form with the values of the generated packages' example (which obey the rules).
func newTryForm(api *catalog.API, post url.Values) tryForm {
	var args []clientgen.Arg
	if post == nil {
		args, _ = clientgen.ExampleArgs(api) // a compiled API: its examples are made
	}
	example := map[string]any{}
	for _, a := range args {
		example[a.Name] = a.Value
	}
	var f tryForm
	params := api.Params
	if u, ok := api.FileURLParam(); ok {
		params = append(params[:len(params):len(params)], u)
		f.File = &fileInfo{Field: api.File.Name, Types: strings.Join(api.File.Types, ", "),
			Max: paramdoc.Bytes(api.File.MaxBytes), MaxBytes: api.File.MaxBytes}
	}
	for i := range params {
		p := &params[i]
		in := input{Name: p.Name, Field: paramPrefix + p.Name, ID: "param-" + strconv.Itoa(i), Type: paramdoc.Type(p),
			Rules: paramdoc.Rules(p), Description: p.Description, Required: p.Required, Kind: "text"}
		value, given := "", false
		if post != nil {
			value, given = post.Get(in.Field), post.Has(in.Field)
		} else if v, ok := example[p.Name]; ok {
			value, given = formValue(p, v), true
		}
		switch {
		case len(p.Enum) > 0:
			in.Kind = "select"
			if !p.Required {
				label := "Not sent"
				if p.Default != nil {
					label = "Not sent: the default, " + paramdoc.Value(p.Default)
				}
				in.Options = append(in.Options, option{Value: "", Label: label, Selected: value == ""})
			}
			for _, e := range p.Enum {
				s := textValue(e)
				in.Options = append(in.Options, option{Value: s, Label: s, Selected: given && value == s})
			}
		case p.Type == catalog.Boolean:
			in.Kind = "checkbox"
			if post != nil {
				in.Checked = value == "true"
			} else if v, ok := example[p.Name].(bool); ok {
				in.Checked = v
			} else if d, ok := p.Default.(bool); ok {
				in.Checked = d
			}
		case p.Type == catalog.Integer || p.Type == catalog.Number:
			in.Kind, in.Value, in.Step = "number", value, "any"
			if p.Type == catalog.Integer {
				in.Step = "1"
			}
			if p.Min != nil {
				in.Min = paramdoc.Value(*p.Min)
			}
			if p.Max != nil {
				in.Max = paramdoc.Value(*p.Max)
			}
		case p.Type == catalog.Array || p.Type == catalog.Object:
			in.Kind, in.Value = "textarea", value
		default:
			in.Value = value
			switch p.Format {
			case catalog.FormatDate:
				in.Kind = "date"
			case catalog.FormatEmail:
				in.Kind = "email"
			case catalog.FormatURL:
				in.Kind = "url"
			default:
				if p.MaxLength == nil || *p.MaxLength > maxTextarea {
					in.Kind = "textarea"
				}
			}
			if p.MinLength != nil {
				in.MinLength = strconv.Itoa(*p.MinLength)
			}
			if p.MaxLength != nil {
				in.MaxLength = strconv.Itoa(*p.MaxLength)
			}
		}
		f.Inputs = append(f.Inputs, in)
	}
	return f
}

// formValue writes a value in a form control: an array's elements one per line, an
// object as JSON text.
func formValue(p *catalog.Param, v any) string {
	if p.Type == catalog.Array {
		if p.Items != nil && (p.Items.Type == catalog.Array || p.Items.Type == catalog.Object) {
			b, _ := json.Marshal(v) // example values are JSON values
			return string(b)
		}
		return strings.Join(textValues(v), "\n")
	}
	return textValue(v)
}

// tryInput returns the parameters of a try as a REST query string or form body gives
// them: a control left empty is not sent (the default applies), a checkbox sends true
// or false, the lines of an array's text area are its elements (or the text is a JSON
// array).
func tryInput(api *catalog.API, post url.Values) url.Values {
	q := url.Values{}
	names := make([]string, 0, len(api.Params)+1)
	for _, p := range api.Params {
		names = append(names, p.Name)
	}
	if api.File != nil {
		names = append(names, catalog.URLParam)
	}
	for _, name := range names {
		field := paramPrefix + name
		p := param(api, name)
		switch {
		case p != nil && p.Type == catalog.Boolean:
			q.Set(name, strconv.FormatBool(post.Get(field) == "true"))
		case post.Get(field) == "":
		case p != nil && p.Type == catalog.Array && !strings.HasPrefix(strings.TrimSpace(post.Get(field)), "["):
			for _, line := range strings.Split(strings.ReplaceAll(post.Get(field), "\r\n", "\n"), "\n") {
				if line != "" {
					q.Add(name, line)
				}
			}
		default:
			q.Set(name, post.Get(field))
		}
	}
	return q
}

// param returns the parameter of api with the given name, or nil.
func param(api *catalog.API, name string) *catalog.Param {
	for i := range api.Params {
		if api.Params[i].Name == name {
			return &api.Params[i]
		}
	}
	return nil
}

// tryResult is the answer of a try, as REST gives it.
type tryResult struct {
	Status     int
	StatusText string
	// Envelope is the response body, indented.
	Envelope string
	// Cost, Remaining and Granted are the X-Credits-Cost, X-Credits-Remaining and
	// X-Credits-Granted headers ("" when the answer has none): Granted is the part of
	// Remaining that grants hold.
	Cost, Remaining, Granted string
	// Headers are the answer's credit, rate and error headers.
	Headers []header
}

type header struct{ Name, Value string }

// shownHeaders are the headers a try's result lists, in this order.
var shownHeaders = []string{
	wire.HeaderCreditsCost, wire.HeaderCreditsRemaining, wire.HeaderCreditsGranted, wire.HeaderCreditsUsed, wire.HeaderCreditsLimit,
	wire.HeaderCreditsRenewal, wire.HeaderPlan, wire.HeaderRateLimit, wire.HeaderRateLimitRemaining,
	wire.HeaderRetryAfter, wire.HeaderErrorCode,
}

// newTryResult makes the result of a try from REST's answer.
func newTryResult(status int, hdr http.Header, body []byte) *tryResult {
	res := &tryResult{Status: status, StatusText: http.StatusText(status),
		Cost: hdr.Get(wire.HeaderCreditsCost), Remaining: hdr.Get(wire.HeaderCreditsRemaining), Granted: hdr.Get(wire.HeaderCreditsGranted)}
	var b bytes.Buffer
	if err := json.Indent(&b, body, "", "  "); err != nil {
		b.Reset()
		b.Write(body)
	}
	res.Envelope = b.String()
	for _, name := range shownHeaders {
		if v := hdr.Get(name); v != "" {
			res.Headers = append(res.Headers, header{name, v})
		}
	}
	return res
}

// tryLimit returns the largest body a try of the API that ?id= names may post: a form,
// and for a file API its file.
func (h *Handler) tryLimit(r *http.Request) int64 {
	if api, ok := h.svc.Catalog().Lookup(r.URL.Query().Get("id")); ok && api.File != nil {
		return maxForm + api.File.MaxBytes
	}
	return maxForm
}

// try calls the API that ?id= names with the form's parameters, through the service's
// call pipeline as REST does: the session is the credential, on the rest channel,
// from the request's address. So the key's restrictions, its address list, the rate
// limit, the concurrency ceiling and the credits apply as to any REST call, and it is
// charged, refused or refunded as one. The page shows REST's answer.
func (h *Handler) try(w http.ResponseWriter, r *http.Request, v *visit) {
	api, ok := h.apiOf(w, r, v)
	if !ok {
		return
	}
	caller := v.Caller
	caller.Channel = auth.ChannelREST
	reply := h.svc.Call(r.Context(), caller, api.ID, func(api *catalog.API) (tollgate.Input, error) {
		in := tollgate.Input{Query: tryInput(api, r.PostForm)}
		if api.File != nil && r.MultipartForm != nil {
			f, err := uploaded(r.MultipartForm, api.File)
			if err != nil {
				return tollgate.Input{}, err
			}
			in.File = f
		}
		return in, nil
	})
	if sessionEnded(reply.Err) {
		seeOther(w, "sign-in?ended=1")
		return
	}
	hdr := http.Header{}
	status, body := edge.Answer(hdr, reply)
	if status >= 500 {
		h.log.ErrorContext(r.Context(), "dashboard: a tried call failed on the service's side", "account", v.Claims.Account,
			"api", api.ID, "code", hdr.Get(wire.HeaderErrorCode))
	}
	h.renderAPI(w, r, v, api, http.StatusOK, newTryForm(api, r.PostForm), newTryResult(status, hdr, body))
}

// uploaded returns the file of a try's multipart form, or nil when it has none (the
// URL form). The service checks its size and type, as for a REST upload.
func uploaded(form *multipart.Form, f *catalog.FileField) (*catalog.File, error) {
	files := form.File[paramPrefix+f.Name]
	switch {
	case len(files) == 0 || files[0].Size == 0 && files[0].Filename == "":
		return nil, nil // the file input left empty
	case len(files) > 1:
		return nil, &tollgate.Error{Code: tollgate.CodeInvalidInput, Message: "send one file in the " + f.Name + " field"}
	}
	fh, err := files[0].Open()
	if err != nil {
		return nil, &tollgate.Error{Code: tollgate.CodeInvalidInput, Message: "the file cannot be read", Err: err}
	}
	defer fh.Close()
	data, err := io.ReadAll(io.LimitReader(fh, f.MaxBytes+1))
	if err != nil {
		return nil, &tollgate.Error{Code: tollgate.CodeInvalidInput, Message: "the file cannot be read", Err: err}
	}
	return &catalog.File{Name: path.Base("/" + files[0].Filename), Data: data}, nil
}
