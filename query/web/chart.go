package web

import (
	"cmp"
	"fmt"
	"html"
	"net/http"
	"strconv"
	"time"

	"gendex/query/plot"
)

// chart draws what 'gendex plot' draws as an SVG: tokens/s (or another
// of plot's metrics, ?metric=) over the run or its last ?since=, with the
// servers' downs, ups and restarts marked. The page shows it as an image:
// an SVG there runs nothing.
//
// Its parameters were checked (checkParams): metric is one of plot's
// words, since a duration, w a width; none is parsed as a flag.
func (s *server) chart(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	var since time.Duration
	if v := q.Get("since"); v != "" {
		since, _ = time.ParseDuration(v)
	}
	width := 900
	if v := q.Get("w"); v != "" {
		width, _ = strconv.Atoi(v)
	}
	a, err := plot.New(cmp.Or(q.Get("metric"), plot.Metrics()[0]), since)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	c, err := a.Chart(r.Context(), s.Ask, s.Now(), 450)
	if err != nil {
		w.Header().Set("Content-Type", "image/svg+xml")
		fmt.Fprint(w, messageSVG(err.Error(), width))
		return
	}
	c.Location = s.Location
	w.Header().Set("Content-Type", "image/svg+xml")
	w.Write(c.SVG(width))
}

// messageSVG is an image that says why there is no chart yet.
func messageSVG(msg string, width int) string {
	return fmt.Sprintf(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="60" viewBox="0 0 %d 60">`+
		`<text x="10" y="35" font-family="sans-serif" font-size="14" fill="#666">%s</text></svg>`, width, width, html.EscapeString(msg))
}
