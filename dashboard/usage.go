package dashboard

import (
	"encoding/csv"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/usage"
)

// usageForm is the usage page's query, as its GET form holds it: dates (UTC, to
// inclusive), the interval, the grouping and the API filter.
type usageForm struct {
	From, To, Interval, By, API string
	APIs                        []string
}

// values returns the form's query values.
func (f usageForm) values() url.Values {
	return url.Values{"from": {f.From}, "to": {f.To}, "interval": {f.Interval}, "by": {f.By}, "api": {f.API}}
}

// CSVLink returns the link to the CSV of the form's figures: a relative URL whose
// query values are encoded here.
func (f usageForm) CSVLink() template.URL {
	return template.URL("usage.csv?" + f.values().Encode())
}

// pageLink returns the link to page n (from 1) of the form's table.
func (f usageForm) pageLink(n int) template.URL {
	v := f.values()
	v.Set("page", strconv.Itoa(n))
	return template.URL("usage?" + v.Encode())
}

// tablePage is how many rows the usage table shows at once: a month of hours of a few
// dozen keys is tens of thousands of rows, which the CSV holds whole.
const tablePage = 500

// usageRow is one point of one group: a row of the table and of the CSV.
type usageRow struct {
	Start                  time.Time
	Group, Name            string
	Calls, Credits, Errors int64
	P50, P95, P99          time.Duration
	Ran                    bool
}

// usageData is the usage page.
type usageData struct {
	Form usageForm
	// Off says why there are no figures ("" when there are).
	Off                    string
	Rows                   []usageRow
	Calls, Credits, Errors int64
	// Shown are the rows of the table's page, First and Last their positions (from 1)
	// among the Total rows; Prev and Next link to the pages around it ("" at either end).
	Shown                          []usageRow
	First, Last, Total             int64
	Prev, Next                     template.URL
	CallsSVG, CreditsSVG, ErrorSVG template.HTML
	Legend                         []legendEntry
}

// legendEntry names the colour of a group's line.
type legendEntry struct {
	Class, Label string
}

// usageQuery reads the form of r into a usage query: from and to are dates (UTC), to
// included; the default range is the last 30 days, today included. It returns the form
// as read (for the page) and what is wrong with it ("" when nothing is).
func (h *Handler) usageQuery(r *http.Request) (usage.Query, usageForm, string) {
	q := r.URL.Query()
	today := usage.Day.Start(h.svc.Now())
	f := usageForm{From: q.Get("from"), To: q.Get("to"), Interval: q.Get("interval"), By: q.Get("by"), API: q.Get("api")}
	for _, a := range h.svc.Catalog().List() {
		f.APIs = append(f.APIs, a.ID)
	}
	if f.To == "" {
		f.To = today.Format(time.DateOnly)
	}
	if f.From == "" {
		f.From = today.AddDate(0, 0, -(chartDays - 1)).Format(time.DateOnly)
	}
	if f.Interval == "" {
		f.Interval = "day"
	}
	if f.By == "" {
		f.By = "api"
	}
	uq := usage.Query{API: f.API}
	from, err := time.Parse(time.DateOnly, f.From)
	if err != nil {
		return uq, f, "from: give a date as YYYY-MM-DD"
	}
	to, err := time.Parse(time.DateOnly, f.To)
	if err != nil {
		return uq, f, "to: give a date as YYYY-MM-DD"
	}
	uq.From, uq.To = from, to.AddDate(0, 0, 1)
	switch f.Interval {
	case "day":
		uq.Interval = usage.Day
	case "hour":
		uq.Interval = usage.Hour
	default:
		return uq, f, "interval: choose hour or day"
	}
	switch f.By {
	case "api":
		uq.By = usage.ByAPI
	case "key":
		uq.By = usage.ByKey
	default:
		return uq, f, "grouping: choose api or key"
	}
	if f.API != "" && !slices.Contains(f.APIs, f.API) {
		return uq, f, "api: choose an API of the catalog"
	}
	return uq, f, ""
}

// usageRows reads the usage the form asks for with the service's OwnUsage (the rule of
// GET /v1/analytics: a sub-key sees only its own calls) and returns its rows, oldest
// first, then by group. Key groups are named with the account's key names when the
// caller may list the keys; a key's value is never read.
func (h *Handler) usageRows(r *http.Request, v *visit, uq usage.Query) ([]usageRow, error) {
	res, err := h.mgr.OwnUsage(r.Context(), v.Caller, uq)
	if err != nil {
		return nil, err
	}
	names := map[string]string{}
	if uq.By == usage.ByKey {
		names = h.keyNames(r, v)
	}
	var rows []usageRow
	for _, s := range res.Series {
		name := names[s.Group]
		if s.Group == "" {
			name = "sessions"
		}
		for _, p := range s.Points {
			row := usageRow{Start: p.Start, Group: s.Group, Name: name, Calls: p.Calls, Credits: p.Credits,
				P50: p.P50, P95: p.P95, P99: p.P99, Ran: p.P50 > 0 || p.P95 > 0 || p.P99 > 0}
			for _, n := range p.Errors {
				row.Errors += n
			}
			rows = append(rows, row)
		}
	}
	slices.SortStableFunc(rows, func(a, b usageRow) int {
		if c := a.Start.Compare(b.Start); c != 0 {
			return c
		}
		return strings.Compare(a.Group, b.Group)
	})
	return rows, nil
}

// usagePage serves the usage page: the form, a chart per figure with a line per group,
// and the table of the same figures.
func (h *Handler) usagePage(w http.ResponseWriter, r *http.Request, v *visit) {
	uq, form, problem := h.usageQuery(r)
	page := v.view("Usage", "usage")
	d := usageData{Form: form}
	page.Data = &d
	if problem != "" {
		page.Error = problem
		h.render(w, r, http.StatusBadRequest, "usage", page)
		return
	}
	rows, err := h.usageRows(r, v, uq)
	if err != nil {
		switch code := tollgate.CodeOf(err); {
		case code == tollgate.CodeNotFound:
			d.Off = "This service does not record usage statistics."
		case code == tollgate.CodeInvalidInput || code == tollgate.CodeForbidden:
			status, msg := statusOf(err)
			page.Error = msg
			h.render(w, r, status, "usage", page)
			return
		default:
			h.failed(w, r, v, err)
			return
		}
	}
	d.Rows = rows
	for _, row := range rows {
		d.Calls += row.Calls
		d.Credits += row.Credits
		d.Errors += row.Errors
	}
	n, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || n < 1 || (n-1)*tablePage >= len(rows) {
		n = 1 // a page past the rows, or none: the first
	}
	first, last := (n-1)*tablePage, min(n*tablePage, len(rows))
	d.Shown, d.First, d.Last, d.Total = rows[first:last], int64(first+1), int64(last), int64(len(rows))
	if n > 1 {
		d.Prev = form.pageLink(n - 1)
	}
	if last < len(rows) {
		d.Next = form.pageLink(n + 1)
	}
	if d.Off == "" {
		uq.Account = v.Claims.Account
		nq, _ := uq.Normalized() // the service accepted it: whole buckets
		d.Legend, d.CallsSVG, d.CreditsSVG, d.ErrorSVG = lineCharts(rows, nq.From, nq.To, time.Duration(uq.Interval))
	}
	h.render(w, r, http.StatusOK, "usage", page)
}

// usageCSV serves the usage page's figures as CSV: a row per point of a group, with
// the group's id and, for keys, its name; never a key's value.
func (h *Handler) usageCSV(w http.ResponseWriter, r *http.Request, v *visit) {
	uq, _, problem := h.usageQuery(r)
	var rows []usageRow
	var err error
	if problem == "" {
		rows, err = h.usageRows(r, v, uq)
	}
	if problem != "" || err != nil {
		if err != nil {
			switch code := tollgate.CodeOf(err); code {
			case tollgate.CodeInvalidInput, tollgate.CodeForbidden, tollgate.CodeNotFound:
				_, problem = statusOf(err)
			default:
				h.failed(w, r, v, err)
				return
			}
		}
		status := http.StatusBadRequest
		if err != nil {
			status, _ = statusOf(err)
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(status)
		fmt.Fprintln(w, problem)
		return
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="usage.csv"`)
	w.Header().Set("Cache-Control", "no-store")
	cw := csv.NewWriter(w)
	group := "api"
	if uq.By == usage.ByKey {
		group = "key_id"
	}
	cw.Write([]string{"start", group, "key_name", "calls", "credits", "errors", "p50_ms", "p95_ms", "p99_ms"})
	for _, row := range rows {
		rec := []string{row.Start.UTC().Format(time.RFC3339), cell(row.Group), "", strconv.FormatInt(row.Calls, 10),
			strconv.FormatInt(row.Credits, 10), strconv.FormatInt(row.Errors, 10), "", "", ""}
		if uq.By == usage.ByKey {
			rec[2] = cell(row.Name)
		}
		if row.Ran {
			rec[6], rec[7], rec[8] = millis(row.P50), millis(row.P95), millis(row.P99)
		}
		cw.Write(rec)
	}
	cw.Flush()
}

// cell keeps a text cell from being read as a formula by a spreadsheet (CSV
// injection): one that begins with =, +, -, @, a tab or a carriage return is prefixed
// with a quote.
func cell(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

// millis writes d in milliseconds, to the microsecond.
func millis(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', -1, 64)
}

// seriesColours is the number of line colours of the charts (CSS classes line-0 to
// line-5); more groups reuse them, and the table tells them apart.
const seriesColours = 6

// lineCharts draws the calls, credits and errors of each group over [from, to), a
// line per group and a point per bucket of width step.
func lineCharts(rows []usageRow, from, to time.Time, step time.Duration) ([]legendEntry, template.HTML, template.HTML, template.HTML) {
	var groups []string
	for _, r := range rows {
		if !slices.Contains(groups, r.Group) {
			groups = append(groups, r.Group)
		}
	}
	slices.Sort(groups)
	n := int(to.Sub(from) / step)
	legend := make([]legendEntry, len(groups))
	for i, g := range groups {
		label := g
		for _, r := range rows {
			if r.Group == g && r.Name != "" && r.Name != g {
				label = r.Name + " (" + g + ")"
				break
			}
		}
		if label == "" {
			label = "sessions"
		}
		legend[i] = legendEntry{Class: "line-" + strconv.Itoa(i%seriesColours), Label: label}
	}
	draw := func(what string, value func(usageRow) int64) template.HTML {
		vals := make([][]int64, len(groups))
		for i := range vals {
			vals[i] = make([]int64, max(n, 1))
		}
		var peak, total int64
		for _, r := range rows {
			i := int(r.Start.Sub(from) / step)
			if i < 0 || i >= n {
				continue
			}
			gi := slices.Index(groups, r.Group)
			vals[gi][i] += value(r)
			peak = max(peak, vals[gi][i])
			total += value(r)
		}
		var b strings.Builder
		fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="usage-%s-title">`, chartW, chartH, what)
		fmt.Fprintf(&b, `<title id="usage-%s-title">%s from %s to %s, a line per group: %d in all, at most %d in an interval</title>`,
			what, titleCase(what), from.Format(time.RFC3339), to.Format(time.RFC3339), total, peak)
		fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%d" x2="%d" y2="%d"/>`, padL, padT, chartW, padT)
		fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, padL, chartH-padB, chartW, chartH-padB)
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%s</text>`, padL-6, padT+4, formatInt(peak))
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">0</text>`, padL-6, chartH-padB+4)
		plotH := float64(chartH - padB - padT)
		slot := float64(chartW-padL) / float64(max(n, 1))
		scale := float64(max(peak, 1))
		for gi := range groups {
			var pts strings.Builder
			for i, val := range vals[gi] {
				fmt.Fprintf(&pts, "%.1f,%.1f ", float64(padL)+(float64(i)+0.5)*slot, float64(chartH-padB)-plotH*float64(val)/scale)
			}
			fmt.Fprintf(&b, `<polyline class="line %s" points="%s"/>`, legend[gi].Class, strings.TrimSpace(pts.String()))
		}
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d">%s</text>`, padL, chartH-6, from.Format("2006-01-02 15:04"))
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%s</text>`, chartW, chartH-6, to.Format("2006-01-02 15:04"))
		b.WriteString(`</svg>`)
		return template.HTML(b.String())
	}
	return legend, draw("calls", func(r usageRow) int64 { return r.Calls }),
		draw("credits", func(r usageRow) int64 { return r.Credits }),
		draw("errors", func(r usageRow) int64 { return r.Errors })
}
