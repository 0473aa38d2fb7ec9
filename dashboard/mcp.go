package dashboard

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/tollgate-dev/tollgate/brand"
)

// mcpPath is where the service's MCP endpoint is, under its root.
const mcpPath = "/v1/mcp"

// keyPlaceholder stands for the person's key in the snippets: the page never holds a
// key's value.
const keyPlaceholder = "YOUR_API_KEY"

// checkPublicURL checks Options.PublicURL: an absolute http or https URL without a
// query or fragment. It returns the URL without a trailing slash.
func checkPublicURL(s string) (string, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", errors.New("dashboard: Options.PublicURL must be an absolute http or https URL without credentials, query or fragment, such as https://api.example.com")
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// mcpURL returns the MCP endpoint's URL under the service's root URL (see
// [Handler.baseURL]).
func (h *Handler) mcpURL(r *http.Request) string { return h.baseURL(r) + mcpPath }

// snippet is a configuration of one MCP client.
type snippet struct {
	// ID is the textarea's id; Client names the client, Where where the text goes.
	ID, Client, Where string
	// Key is the configuration with the key header, OAuth the one without.
	Key, OAuth string
	// Rows sizes the text areas.
	Rows int
}

// mcpData is the MCP page.
type mcpData struct {
	URL, Header, Placeholder string
	Snippets                 []snippet
}

// jsonText returns v as indented JSON.
func jsonText(v any) string {
	b, _ := json.MarshalIndent(v, "", "  ") // maps of strings: cannot fail
	return string(b)
}

// shellQuote quotes s for a POSIX shell.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// mcpSnippets returns the configurations of common MCP clients for the endpoint u,
// which name the server by the brand's command and read the key from its variable.
func mcpSnippets(u string, b brand.Brand) []snippet {
	header := "x-api-key: " + keyPlaceholder
	headers := map[string]string{"x-api-key": keyPlaceholder}
	qu := shellQuote(u)
	name, keyVar, input := b.Command, b.KeyVar(), b.Command+"-key" // names of safe characters only
	snips := []snippet{
		{ID: "claude-code", Client: "Claude Code", Where: "Run in a terminal.",
			Key:   "claude mcp add --transport http " + name + " " + qu + " --header " + shellQuote(header),
			OAuth: "claude mcp add --transport http " + name + " " + qu + "\n# then, in Claude Code: /mcp, choose " + name + ", Authenticate"},
		{ID: "claude-desktop", Client: "Claude Desktop", Where: "In claude_desktop_config.json (Settings, Developer, Edit Config); it runs the mcp-remote bridge with npx.",
			Key: jsonText(map[string]any{"mcpServers": map[string]any{name: map[string]any{
				"command": "npx", "args": []string{"mcp-remote", u, "--header", "x-api-key:${" + keyVar + "}"},
				"env": map[string]string{keyVar: keyPlaceholder}}}}),
			OAuth: jsonText(map[string]any{"mcpServers": map[string]any{name: map[string]any{
				"command": "npx", "args": []string{"mcp-remote", u}}}})},
		{ID: "cursor", Client: "Cursor", Where: "In ~/.cursor/mcp.json, or .cursor/mcp.json in a project.",
			Key:   jsonText(map[string]any{"mcpServers": map[string]any{name: map[string]any{"url": u, "headers": headers}}}),
			OAuth: jsonText(map[string]any{"mcpServers": map[string]any{name: map[string]any{"url": u}}})},
		{ID: "vscode", Client: "VS Code", Where: "In .vscode/mcp.json; VS Code asks for the key once and keeps it in its secret storage.",
			Key: jsonText(map[string]any{
				"inputs": []any{map[string]any{"type": "promptString", "id": input, "description": b.Name + " API key", "password": true}},
				"servers": map[string]any{name: map[string]any{"type": "http", "url": u,
					"headers": map[string]string{"x-api-key": "${input:" + input + "}"}}}}),
			OAuth: jsonText(map[string]any{"servers": map[string]any{name: map[string]any{"type": "http", "url": u}}})},
		{ID: "inspector", Client: "MCP Inspector", Where: "Run in a terminal; it lists the tools. Without --cli it opens the Inspector's page, where you choose Streamable HTTP, this URL, and the header (or OAuth).",
			Key:   "npx @modelcontextprotocol/inspector --cli " + qu + " --transport http --header " + shellQuote(header) + " --method tools/list",
			OAuth: "npx @modelcontextprotocol/inspector\n# Transport: Streamable HTTP, URL: " + u + ", then Open Auth Settings, Quick OAuth Flow"},
	}
	for i := range snips {
		snips[i].Rows = max(strings.Count(snips[i].Key, "\n"), strings.Count(snips[i].OAuth, "\n")) + 2
	}
	return snips
}

// mcpPage serves the MCP page: the endpoint's URL and the configuration of common MCP
// clients, with a placeholder for the key (never a key's value) or with OAuth.
func (h *Handler) mcpPage(w http.ResponseWriter, r *http.Request, v *visit) {
	u := h.mcpURL(r)
	page := v.view("Connect an MCP client", "mcp")
	page.Data = mcpData{URL: u, Header: "x-api-key", Placeholder: keyPlaceholder, Snippets: mcpSnippets(u, h.brand)}
	h.render(w, r, http.StatusOK, "mcp", page)
}
