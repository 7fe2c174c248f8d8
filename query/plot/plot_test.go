package plot

import (
	"strings"
	"testing"
	"time"

	"gendex/query/chart"
)

// TestShortServers: per server, the panels and the marks name the servers
// in the shortest form that tells them apart, the same in both: the scheme
// left out, host:port kept (servers on one host too); TOTAL stays.
func TestShortServers(t *testing.T) {
	a := &Args{metric: metrics[2]} // queue, per server
	c := &chart.Chart{Title: a.metric.title, Series: []chart.Series{
		{Name: "TOTAL"}, {Name: "http://127.0.0.1:30001"}, {Name: "http://127.0.0.1:30002"},
	}, Marks: []chart.Mark{{Time: time.Unix(0, 0), Kind: "down", Label: "http://127.0.0.1:30002 down"}}}
	a.shortServers(c, []string{"http://127.0.0.1:30002"})
	var names []string
	for _, s := range c.Series {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, " "); got != "TOTAL 127.0.0.1:30001 127.0.0.1:30002" {
		t.Errorf("panels: %s; want TOTAL 127.0.0.1:30001 127.0.0.1:30002", got)
	}
	if c.Marks[0].Label != "127.0.0.1:30002 down" {
		t.Errorf("mark: %q; want \"127.0.0.1:30002 down\"", c.Marks[0].Label)
	}
	if c.Title != a.metric.title {
		t.Errorf("title %q; want %q as it was", c.Title, a.metric.title)
	}
	// Servers on several hosts: host:port, the scheme left out.
	c = &chart.Chart{Series: []chart.Series{{Name: "http://gpu1:30000"}, {Name: "http://gpu2:30000"}}}
	a.shortServers(c, nil)
	if c.Series[0].Name != "gpu1:30000" || c.Series[1].Name != "gpu2:30000" {
		t.Errorf("panels of two hosts: %q, %q", c.Series[0].Name, c.Series[1].Name)
	}

	// Per dataset, the panels keep their names; the marks' one server
	// loses its scheme.
	a = &Args{metric: metrics[0]}
	c = &chart.Chart{Series: []chart.Series{{Name: "http_like"}}, Marks: []chart.Mark{{Kind: "up", Label: "x"}}}
	a.shortServers(c, []string{"http://gpu1:30000"})
	if c.Series[0].Name != "http_like" || c.Marks[0].Label != "gpu1:30000 up" {
		t.Errorf("per dataset: panel %q, mark %q", c.Series[0].Name, c.Marks[0].Label)
	}
}

// TestFitNamesKeepsThePort: a panel's name wider than half the chart is
// cut in the middle, its port (or a path's last part) kept whole.
func TestFitNamesKeepsThePort(t *testing.T) {
	c := &chart.Chart{Series: []chart.Series{
		{Name: "a-very-long-inference-host-name.cluster.example.org:30000"},
		{Name: "gpu1:30000"},
		{Name: "a/deeply/nested/folder/of/datasets/B4_sharegpt"},
	}}
	fitNames(c, 60)
	for i, want := range []string{":30000", "gpu1:30000", "/B4_sharegpt"} {
		n := c.Series[i].Name
		if !strings.HasSuffix(n, want) || len([]rune(n)) > 30 {
			t.Errorf("panel %d: %q; want within 30 columns, ending in %q", i, n, want)
		}
	}
	if !strings.Contains(c.Series[0].Name, "…") {
		t.Errorf("the long name was not cut in the middle: %q", c.Series[0].Name)
	}
}
