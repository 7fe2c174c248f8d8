package gen

import (
	"bytes"
	"strings"
	"testing"

	"gendex/ingest/gen/client"
	"gendex/store/prom"
	"gendex/store/prom/promtest"
)

// TestWriteMetrics: gen's samples are labelled by each server's URL,
// redacted and then escaped as the exposition format asks (a quote, a
// backslash; a zero-width joiner as it is), and promtool reads them. A
// stalled server is not up, and stalled.
func TestWriteMetrics(t *testing.T) {
	t.Parallel()
	var servers []*server
	for _, u := range []string{"http://alice:hunter2@gpu-1:30000", "http://router/数据\"集\\👩\u200d💻", "http://gpu-2:30000"} {
		servers = append(servers, &server{name: client.New(u, client.Options{}).Server()})
	}
	servers[0].up.Store(true)
	servers[0].inFlight.Store(4)
	servers[0].done.Store(17)
	servers[2].up.Store(true) // up, but holding a request it replies to none of
	servers[2].flights.on = map[uint64]flight{1: {dataset: "d", id: "1"}}
	servers[2].flights.stalled = &stall{held: 1}
	a := &asker{pool: newPool(servers)}
	var b bytes.Buffer
	a.writeMetrics(prom.NewWriter(&b))
	want := `# HELP gendex_in_flight Requests in flight, by server.
# TYPE gendex_in_flight gauge
gendex_in_flight{server="http://REDACTED@gpu-1:30000"} 4
gendex_in_flight{server="ROUTER"} 0
gendex_in_flight{server="http://gpu-2:30000"} 0
# HELP gendex_server_up Whether a server answers (1), or is waited for or stalled (0).
# TYPE gendex_server_up gauge
gendex_server_up{server="http://REDACTED@gpu-1:30000"} 1
gendex_server_up{server="ROUTER"} 0
gendex_server_up{server="http://gpu-2:30000"} 0
# HELP gendex_server_stalled Whether a server holds requests it replies to none of (gen's stall rule).
# TYPE gendex_server_stalled gauge
gendex_server_stalled{server="http://REDACTED@gpu-1:30000"} 0
gendex_server_stalled{server="ROUTER"} 0
gendex_server_stalled{server="http://gpu-2:30000"} 1
# HELP gendex_answers_total Answers written by this run, by server.
# TYPE gendex_answers_total counter
gendex_answers_total{server="http://REDACTED@gpu-1:30000"} 17
gendex_answers_total{server="ROUTER"} 0
gendex_answers_total{server="http://gpu-2:30000"} 0
`
	// The second server's label: its quote and backslash escaped, the rest
	// as it is.
	want = strings.ReplaceAll(want, "ROUTER", "http://router/数据\\\"集\\\\👩\u200d💻")
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(b.String(), "hunter2") {
		t.Error("the metrics show the password")
	}
	promtest.Check(t, b.Bytes())
}
