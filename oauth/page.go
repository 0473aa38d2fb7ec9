package oauth

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"html/template"
	"net/http"
)

// consentStyle is the page's only style sheet; the Content-Security-Policy allows it
// by its hash and nothing else.
const consentStyle = `
body{font:16px/1.5 system-ui,sans-serif;margin:0;background:#f4f5f7;color:#1d2330}
main{max-width:34rem;margin:3rem auto;background:#fff;border-radius:8px;padding:2rem;box-shadow:0 1px 4px #0002}
h1{font-size:1.35rem;margin:0 0 1rem}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.3rem 1rem;margin:1rem 0}
dt{color:#5b6275}dd{margin:0;word-break:break-all}
.destination{font-size:1.1rem;border:2px solid #1d4ed8;border-radius:6px;padding:.7rem .9rem;margin:1rem 0}
.destination strong{font-size:1.3rem;word-break:break-all}
.note{background:#fff7e0;border-left:4px solid #e0a800;padding:.5rem .8rem;margin:1rem 0}
.error{background:#fdecea;border-left:4px solid #c62828;padding:.5rem .8rem;margin:1rem 0}
label{display:block;margin:1rem 0 .3rem;font-weight:600}
input[type=password]{width:100%;box-sizing:border-box;padding:.5rem;font:inherit;border:1px solid #9aa1b1;border-radius:4px}
.buttons{display:flex;gap:.8rem;margin-top:1.5rem}
button{font:inherit;padding:.55rem 1.2rem;border-radius:4px;border:1px solid #1d4ed8;cursor:pointer}
button.approve{background:#1d4ed8;color:#fff}button.deny{background:#fff;color:#1d4ed8}
`

// consentHTML is the consent page, and the page that shows errors which cannot be sent
// to the client. html/template escapes every value.
const consentHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{if .Form}}Connect {{.ClientName}} to {{.Service}}{{else}}{{.Service}}: authorization failed{{end}}</title>
<style>{{.Style}}</style>
</head>
<body>
<main>
{{if .Form -}}
<h1>{{.ClientName}} wants to use {{.Service}} with your API key</h1>
<p class="destination">If you approve or deny, you will be sent to <strong>{{.RedirectHost}}</strong>{{if .Loopback}}, a program on this computer{{end}}.</p>
<dl>
<dt>Application</dt><dd>{{.ClientName}}</dd>
<dt>Client id</dt><dd>{{.ClientID}}</dd>
<dt>Returns to</dt><dd>{{.RedirectURI}}</dd>
<dt>Access to</dt><dd>{{.Resource}}</dd>
</dl>
{{if .Document -}}
<p class="note"><strong>Unverified application.</strong> Its name comes from a document published at {{.ClientHost}}. {{.Service}} knows only that the document is served there, not who runs the application.{{if .HostsDiffer}} It returns to {{.RedirectHost}}, not to {{.ClientHost}}.{{end}} Approve only if you started this connection yourself.</p>
{{- else -}}
<p class="note"><strong>Unverified application.</strong> It registered itself with {{.Service}} and chose its own name, which nobody has checked. Approve only if you started this connection yourself and expect to return to {{.RedirectHost}}.</p>
{{- end}}
{{if .Loopback}}<p class="note">The application receives the answer on this computer ({{.RedirectHost}}). Any program running here could claim to be it: approve only if you have just started the connection from an application on this computer.</p>{{end}}
<p>If you approve, the application can call every API your key may call, spending its credits, until you revoke the key or the connection.</p>
{{with .Error}}<p class="error" role="alert">{{.}}</p>{{end}}
<form method="post" action="authorize" autocomplete="off">
{{range .Fields}}<input type="hidden" name="{{.Name}}" value="{{.Value}}">
{{end -}}
{{if .LoginKeyID -}}
<p>You are signed in. The connection will use the API key <strong>{{.LoginKeyID}}</strong>.</p>
{{- else -}}
<label for="api_key">Your API key</label>
<input type="password" id="api_key" name="api_key" required autofocus spellcheck="false" placeholder="xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx">
{{- end}}
<div class="buttons">
<button class="approve" type="submit" name="action" value="approve">Approve</button>
<button class="deny" type="submit" name="action" value="deny" formnovalidate>Deny</button>
</div>
</form>
{{- else -}}
<h1>The authorization request cannot be completed</h1>
<p class="error" role="alert">{{.Error}}</p>
<p>Go back to the application and start the connection again.</p>
{{- end}}
</main>
</body>
</html>
`

// pageData is what the consent page shows.
type pageData struct {
	Service      string
	Style        template.CSS
	Form         bool // false: an error page
	Error        string
	ClientName   string
	ClientID     string
	Document     bool   // the client's id is the https URL of its metadata document
	ClientHost   string // the host of that URL
	HostsDiffer  bool   // a document client returns to another host than its document's
	Resource     string
	RedirectURI  string
	RedirectHost string // host and port, shown prominently
	Loopback     bool   // the client returns to the person's own computer
	LoginKeyID   string
	Fields       []field
}

// A field is a hidden field of the consent form.
type field struct{ Name, Value string }

// consentTemplate parses the consent page and returns it with the CSP source that
// allows its style sheet.
func consentTemplate() (*template.Template, string, error) {
	t, err := template.New("consent").Parse(consentHTML)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256([]byte(consentStyle))
	return t, "'sha256-" + base64.StdEncoding.EncodeToString(sum[:]) + "'", nil
}

// setPageHeaders sets the headers of every answer of the authorization endpoint: no
// framing (clickjacking), no caching, no referrer, nothing but the page's own style.
func (s *Server) setPageHeaders(h http.Header) {
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src "+s.styleCSP+"; frame-ancestors 'none'; base-uri 'none'")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
}

// writePage renders the consent page, or an error page when d.Form is false.
func (s *Server) writePage(w http.ResponseWriter, status int, d pageData) {
	d.Service = s.name
	d.Style = template.CSS(consentStyle)
	var buf bytes.Buffer
	if err := s.page.Execute(&buf, d); err != nil {
		s.log.Error("oauth: rendering the consent page", "error", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	s.setPageHeaders(w.Header())
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// writeErrorPage shows an error that cannot be sent to the client.
func (s *Server) writeErrorPage(w http.ResponseWriter, status int, msg string) {
	s.writePage(w, status, pageData{Error: msg})
}
