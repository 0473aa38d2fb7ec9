package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/billing/driver"
	"github.com/tollgate-dev/tollgate/metrics"
)

// dashboard is the Grafana dashboard in the repository.
const dashboard = "../docs/grafana/tollgate.json"

type grafanaPanel struct {
	Type    string
	Title   string
	Targets []struct{ Expr string }
	Panels  []grafanaPanel
}

// exposed returns every family the package exposes, each with the labels of its
// series: the metrics of known events, of every source, and of stores that failed.
func exposed(t *testing.T) map[string]*family {
	t.Helper()
	m, reg := newMetrics(t, nil)
	for _, e := range callEvents() {
		m.Observe(context.Background(), e)
	}
	f := &fakeSources{}
	m.Watch(metrics.Sources{Settlements: f, Usage: f, Audit: f, MCP: f, WebhookDispatch: dispatchFake{},
		WebhookDelivery: deliveryFake{}, WebhookOutbox: outboxFake{}})
	st := m.Stores(tollgate.Stores{Rates: failing{}})
	st.Rates.Allow(context.Background(), "down", driver.Limit{Rate: 1, Per: time.Second, Burst: 1}, time.Time{})
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*family{}
	for _, mf := range families {
		fam := &family{typ: mf.GetType(), labels: map[string]bool{}}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				fam.labels[l.GetName()] = true
			}
		}
		out[mf.GetName()] = fam
	}
	return out
}

type family struct {
	typ    dto.MetricType
	labels map[string]bool
	used   bool
}

// TestDashboard checks the Grafana dashboard against the metrics: it is JSON that
// Grafana reads, every query of its panels and variables is well-formed PromQL (as far
// as lintPromQL checks) that names only metrics the package exposes, with labels they
// have, and every metric the package exposes is on some panel. (The CI test that runs
// Prometheus on the example server checks that every query returns data.)
func TestDashboard(t *testing.T) {
	raw, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title, UID string
		Panels     []grafanaPanel
		Templating struct {
			List []struct {
				Name, Type string
				Definition string
			}
		}
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	if dash.Title == "" || dash.UID == "" {
		t.Errorf("the dashboard has no title or uid")
	}
	fams := exposed(t)
	var queries int
	var walk func([]grafanaPanel)
	walk = func(ps []grafanaPanel) {
		for _, p := range ps {
			walk(p.Panels)
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				queries++
				if err := lintPromQL(tg.Expr, fams); err != nil {
					t.Errorf("panel %q: %s: %v", p.Title, tg.Expr, err)
				}
			}
		}
	}
	walk(dash.Panels)
	if queries == 0 {
		t.Fatal("the dashboard has no query")
	}
	labelValues := regexp.MustCompile(`^label_values\((\w+), (\w+)\)$`)
	for _, v := range dash.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Errorf("variable %s: %q is not label_values(metric, label)", v.Name, v.Definition)
			continue
		}
		if f := fams[m[1]]; f == nil || !(f.labels[m[2]] || targetLabels[m[2]]) {
			t.Errorf("variable %s: %s has no label %s", v.Name, m[1], m[2])
		}
	}
	for name, f := range fams {
		if !f.used {
			t.Errorf("no panel shows %s", name)
		}
	}
}

// TestLintPromQL checks that the checker of the dashboard's queries refuses what it
// should.
func TestLintPromQL(t *testing.T) {
	fams := exposed(t)
	for _, tc := range []struct{ expr, err string }{
		{`sum by (api) (rate(tollgate_calls_total{api=~"$api"}[$__rate_interval]))`, ""},
		{`histogram_quantile(0.9, sum by (le) (rate(tollgate_call_duration_seconds_bucket[5m])))`, ""},
		{`sum(rate(tollgate_calls_total[5m])) / sum(rate(tollgate_calls_total[5m])) or vector(0)`, ""},
		{`sum(rate(tollgate_call_total[5m]))`, "no metric tollgate_call_total"},
		{`sum(rate(tollgate_calls_total[5m])`, "unbalanced"},
		{`sum(rate(tollgate_calls_total{api="x"[5m]))`, "matcher"},
		{`sum by (account) (rate(tollgate_calls_total[5m]))`, "label account"},
		{`sum(rate(tollgate_calls_total{key="x"}[5m]))`, "label key"},
		{`sum(rate(tollgate_calls_total[5 minutes]))`, "range"},
		{`sum(rates(tollgate_calls_total[5m]))`, "function rates"},
		{`sum(rate(tollgate_calls_total{api=~"("}[5m]))`, "regular expression"},
		{`sum(rate(tollgate_call_duration_seconds[5m]))`, "no metric tollgate_call_duration_seconds"},
		{`sum(rate(tollgate_calls_total{api="x}[5m]))`, "unterminated"},
	} {
		err := lintPromQL(tc.expr, fams)
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.expr, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want an error about %q", tc.expr, err, tc.err)
		}
	}
}

// targetLabels are the labels Prometheus gives every series it scrapes.
var targetLabels = map[string]bool{"instance": true, "job": true}

// functions are the PromQL functions and aggregations the dashboard may use.
var functions = map[string]bool{
	"sum": true, "avg": true, "min": true, "max": true, "count": true, "topk": true, "bottomk": true,
	"rate": true, "irate": true, "increase": true, "histogram_quantile": true, "vector": true,
	"clamp_min": true, "clamp_max": true, "sum_over_time": true, "max_over_time": true, "abs": true,
}

// keywords are the PromQL words that are neither functions nor metrics.
var keywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true,
	"group_right": true, "or": true, "and": true, "unless": true, "bool": true, "offset": true}

// lintPromQL checks expr, a query of the dashboard, without a PromQL parser (whose
// module is heavy): Grafana's variables stand for what they hold; brackets balance;
// strings end; ranges are durations; every function is one PromQL has; every
// selector's matchers are label, operator, string (a regular expression for =~ and
// !~); every metric is one of fams (a histogram's by its _bucket, _sum and _count
// series), marked used; and every label matched or grouped by is one of a metric of
// the query (or le, for a histogram's buckets), or a target label.
func lintPromQL(expr string, fams map[string]*family) error {
	expr = strings.NewReplacer("$__rate_interval", "5m", "$__range", "1h", "$__interval", "1m").Replace(expr)
	expr = regexp.MustCompile(`\$\{?\w+\}?`).ReplaceAllString(expr, ".*")
	toks, err := tokenize(expr)
	if err != nil {
		return err
	}
	var (
		stack   []string
		metrics []*family
		grouped []string
		buckets bool
	)
	for i := 0; i < len(toks); i++ {
		tk := toks[i]
		next := func(k int) token {
			if i+k < len(toks) {
				return toks[i+k]
			}
			return token{}
		}
		switch tk.kind {
		case "(", "{":
			stack = append(stack, tk.kind)
		case ")", "}":
			want := map[string]string{")": "(", "}": "{"}[tk.kind]
			if len(stack) == 0 || stack[len(stack)-1] != want {
				return fmt.Errorf("unbalanced %s", tk.kind)
			}
			stack = stack[:len(stack)-1]
		case "range":
			if prev := toks[i-1]; prev.kind != "}" && prev.kind != "ident" {
				return fmt.Errorf("a range [%s] follows %q, not a selector", tk.text, prev.text)
			}
			if !regexp.MustCompile(`^(\d+[smhdwy])+(:(\d+[smhdwy])+)?$`).MatchString(tk.text) {
				return fmt.Errorf("the range [%s] is not a duration", tk.text)
			}
		case "ident":
			switch {
			case tk.text == "by" || tk.text == "without":
				if next(1).kind != "(" {
					return fmt.Errorf("%s is not followed by a list of labels", tk.text)
				}
				j := i + 2
				for ; j < len(toks) && toks[j].kind != ")"; j++ {
					if toks[j].kind == "ident" {
						grouped = append(grouped, toks[j].text)
					} else if toks[j].kind != "," {
						return fmt.Errorf("%s (...) holds %q", tk.text, toks[j].text)
					}
				}
				i = j
			case keywords[tk.text]:
			case next(1).kind == "(" || next(1).text == "by" || next(1).text == "without":
				if !functions[tk.text] {
					return fmt.Errorf("no function %s", tk.text)
				}
			default:
				f, bucket := lookup(fams, tk.text)
				if f == nil {
					return fmt.Errorf("no metric %s is exposed", tk.text)
				}
				f.used = true
				metrics = append(metrics, f)
				buckets = buckets || bucket
				if next(1).kind != "{" {
					continue
				}
				// The matchers: label op "string" [, ...] }.
				j := i + 2
				for get(toks, j).kind != "}" {
					l, op, s := get(toks, j), get(toks, j+1), get(toks, j+2)
					if l.kind != "ident" || op.kind != "op" || !slices.Contains([]string{"=", "!=", "=~", "!~"}, op.text) || s.kind != "string" {
						return fmt.Errorf("the matcher at %q is not label, operator, string", l.text)
					}
					if !f.labels[l.text] && !targetLabels[l.text] {
						return fmt.Errorf("%s has no label %s", tk.text, l.text)
					}
					if op.text == "=~" || op.text == "!~" {
						if _, err := regexp.Compile("^(?:" + s.text + ")$"); err != nil {
							return fmt.Errorf("the matcher of %s: not a regular expression: %v", l.text, err)
						}
					}
					j += 3
					switch c := get(toks, j); c.kind {
					case ",":
						j++
					case "}":
					default:
						return fmt.Errorf("the matcher of %s is followed by %q", l.text, c.text)
					}
				}
				i = j
			}
		}
	}
	if len(stack) > 0 {
		return fmt.Errorf("unbalanced %s", stack[len(stack)-1])
	}
	for _, l := range grouped {
		if targetLabels[l] || (l == "le" && buckets) || slices.ContainsFunc(metrics, func(f *family) bool { return f.labels[l] }) {
			continue
		}
		return fmt.Errorf("no metric of the query has the label %s", l)
	}
	return nil
}

func get(toks []token, i int) token {
	if i < len(toks) {
		return toks[i]
	}
	return token{}
}

// lookup returns the family of a series name, and whether it is a histogram's
// buckets.
func lookup(fams map[string]*family, name string) (*family, bool) {
	if f := fams[name]; f != nil && f.typ != dto.MetricType_HISTOGRAM {
		return f, false
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if f := fams[base]; f != nil && f.typ == dto.MetricType_HISTOGRAM {
				return f, suffix == "_bucket"
			}
		}
	}
	return nil, false
}

type token struct{ kind, text string }

// tokenize splits a query into identifiers, numbers, strings (unquoted), ranges (the
// text between [ and ]), operators and the punctuation ( ) { } ,.
func tokenize(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ':
			i++
		case c == '"' || c == '\'':
			j := i + 1
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' {
					j++
				}
			}
			if j >= len(s) {
				return nil, fmt.Errorf("unterminated string at %d", i)
			}
			text, err := strconv.Unquote(`"` + strings.ReplaceAll(s[i+1:j], `"`, `\"`) + `"`)
			if err != nil {
				return nil, fmt.Errorf("the string at %d: %v", i, err)
			}
			toks = append(toks, token{"string", text})
			i = j + 1
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("unbalanced [ at %d", i)
			}
			toks = append(toks, token{"range", s[i+1 : i+j]})
			i += j + 1
		case strings.IndexByte("(){},", c) >= 0:
			toks = append(toks, token{string(c), string(c)})
			i++
		case c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
			j := i
			for j < len(s) && (s[j] == '_' || s[j] == ':' || s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			toks = append(toks, token{"ident", s[i:j]})
			i = j
		case c >= '0' && c <= '9' || c == '.':
			j := i
			for j < len(s) && (s[j] >= '0' && s[j] <= '9' || s[j] == '.' || s[j] == 'e') {
				j++
			}
			if _, err := strconv.ParseFloat(s[i:j], 64); err != nil {
				return nil, fmt.Errorf("the number %q", s[i:j])
			}
			toks = append(toks, token{"number", s[i:j]})
			i = j
		case strings.IndexByte("=!~<>+-*/%^", c) >= 0:
			j := i + 1
			if j < len(s) && strings.IndexByte("=~", s[j]) >= 0 {
				j++
			}
			toks = append(toks, token{"op", s[i:j]})
			i = j
		default:
			return nil, fmt.Errorf("unexpected %q at %d", c, i)
		}
	}
	return toks, nil
}
