package dashboard

import (
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/tollgate-dev/tollgate"
	"github.com/tollgate-dev/tollgate/usage"
)

// chartDays is the number of days the overview's chart covers, today included.
const chartDays = 30

// dayRow is one day of the chart, and of the table that gives its figures.
type dayRow struct {
	Day            time.Time
	Calls, Credits int64
}

// usageChart is the overview's usage: two bar charts (calls, credits) drawn on the
// server as SVG, and the table of the same figures.
type usageChart struct {
	// Off says why there is no chart ("" when there is one).
	Off                  string
	Days                 []dayRow
	Calls, Credits       int64
	CallsSVG, CreditsSVG template.HTML
}

// lastDays reads the usage of the last 30 days (today included, by UTC day) with the
// service's OwnUsage, as GET /v1/account/usage does, and draws it.
func (h *Handler) lastDays(r *http.Request, v *visit) (usageChart, error) {
	now := h.svc.Now().UTC()
	today := usage.Day.Start(now)
	res, err := h.mgr.OwnUsage(r.Context(), v.Caller, usage.Query{
		From: today.AddDate(0, 0, -(chartDays - 1)), To: today.AddDate(0, 0, 1), Interval: usage.Day})
	if err != nil {
		if tollgate.CodeOf(err) == tollgate.CodeNotFound {
			return usageChart{Off: "This service does not record usage statistics."}, nil
		}
		return usageChart{}, err
	}
	c := usageChart{}
	byDay := map[int64]usage.Point{}
	for _, s := range res.Series {
		for _, p := range s.Points {
			q := byDay[p.Start.Unix()]
			q.Calls += p.Calls
			q.Credits += p.Credits
			byDay[p.Start.Unix()] = q
		}
	}
	for d := res.Query.From; d.Before(res.Query.To); d = d.AddDate(0, 0, 1) {
		p := byDay[d.Unix()]
		c.Days = append(c.Days, dayRow{Day: d, Calls: p.Calls, Credits: p.Credits})
		c.Calls += p.Calls
		c.Credits += p.Credits
	}
	c.CallsSVG = barChart(c.Days, "calls", func(d dayRow) int64 { return d.Calls })
	c.CreditsSVG = barChart(c.Days, "credits", func(d dayRow) int64 { return d.Credits })
	return c, nil
}

// Chart geometry, in the SVG's own units; CSS scales it to the page's width.
const (
	chartW, chartH = 600, 180
	padL, padB     = 56, 24
	padT           = 10
)

// barChart draws one bar per day. Its text is only numbers and dates, which need no
// escaping; the chart is an image with a text alternative (role="img", a title), and
// the page's table gives every figure.
func barChart(days []dayRow, what string, value func(dayRow) int64) template.HTML {
	var peak int64
	var total int64
	for _, d := range days {
		peak = max(peak, value(d))
		total += value(d)
	}
	scale := max(peak, 1)
	var b strings.Builder
	first, last := "", ""
	if len(days) > 0 {
		first, last = days[0].Day.Format("2006-01-02"), days[len(days)-1].Day.Format("2006-01-02")
	}
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" role="img" aria-labelledby="chart-%s-title">`, chartW, chartH, what)
	fmt.Fprintf(&b, `<title id="chart-%s-title">%s per day from %s to %s: %d in all, at most %d in a day</title>`,
		what, titleCase(what), first, last, total, peak)
	plotH := float64(chartH - padB - padT)
	// Axis: the peak and zero, with grid lines.
	fmt.Fprintf(&b, `<line class="grid" x1="%d" y1="%d" x2="%d" y2="%d"/>`, padL, padT, chartW, padT)
	fmt.Fprintf(&b, `<line class="axis" x1="%d" y1="%d" x2="%d" y2="%d"/>`, padL, chartH-padB, chartW, chartH-padB)
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%s</text>`, padL-6, padT+4, formatInt(peak))
	fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">0</text>`, padL-6, chartH-padB+4)
	if n := len(days); n > 0 {
		slot := float64(chartW-padL) / float64(n)
		for i, d := range days {
			v := value(d)
			hgt := plotH * float64(v) / float64(scale)
			x := float64(padL) + float64(i)*slot + slot*0.15
			fmt.Fprintf(&b, `<rect class="bar bar-%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f"><title>%s: %s</title></rect>`,
				what, x, float64(chartH-padB)-hgt, slot*0.7, hgt, d.Day.Format("2006-01-02"), formatInt(v))
		}
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d">%s</text>`, padL, chartH-6, first)
		fmt.Fprintf(&b, `<text class="label" x="%d" y="%d" text-anchor="end">%s</text>`, chartW, chartH-6, last)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// titleCase capitalizes the first letter of an ASCII word.
func titleCase(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}
