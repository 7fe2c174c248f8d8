package gen

// Reading a server's /metrics: the Prometheus text format parsed (only the
// families gen keeps), and SGLang's per-rank samples combined into one
// store.ServerSample (scrapedMetrics says how each metric is combined).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"gendex/store"
)

// maxMetricsBody bounds what is read of one /metrics answer (SGLang's, with
// its histograms for every rank, is some hundreds of KB).
const maxMetricsBody = 16 << 20

// promSample is one sample line of the Prometheus text format.
type promSample struct {
	name   string
	labels []promLabel
	value  float64
}

type promLabel struct{ name, value string }

func (s *promSample) label(name string) (string, bool) {
	for _, l := range s.labels {
		if l.name == name {
			return l.value, true
		}
	}
	return "", false
}

// parseProm reads the Prometheus text exposition format (version 0.0.4,
// and the OpenMetrics lines SGLang's Python client writes): every sample
// line's name, labels and value. Comments (# HELP, # TYPE, # EOF) and
// blank lines are skipped; histogram and summary samples (_bucket, _sum,
// _count) come back as samples of those names, for the caller to ignore.
// Label values are unescaped (\\, \" and \n). A line that does not parse
// is skipped and counted in bad. keep, when set, says which names to
// read: the lines of other names are skipped after their name.
func parseProm(text []byte, keep func(name string) bool) (samples []promSample, bad int) {
	for len(text) > 0 {
		var line []byte
		if i := bytes.IndexByte(text, '\n'); i >= 0 {
			line, text = text[:i], text[i+1:]
		} else {
			line, text = text, nil
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if keep != nil {
			n := 0
			for n < len(line) && isNameByte(line[n], n == 0) {
				n++
			}
			if n > 0 && !keep(string(line[:n])) {
				continue
			}
		}
		s, ok := parsePromLine(string(line))
		if !ok {
			bad++
			continue
		}
		samples = append(samples, s)
	}
	return samples, bad
}

func isNameByte(c byte, first bool) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || !first && c >= '0' && c <= '9'
}

// parsePromLine reads `name{label="value",...} value [timestamp]`.
func parsePromLine(line string) (promSample, bool) {
	var s promSample
	i := 0
	for i < len(line) && isNameByte(line[i], i == 0) {
		i++
	}
	if i == 0 {
		return s, false
	}
	s.name, line = line[:i], line[i:]
	line = strings.TrimLeft(line, " \t")
	if strings.HasPrefix(line, "{") {
		line = line[1:]
		for {
			line = strings.TrimLeft(line, " \t")
			if strings.HasPrefix(line, "}") {
				line = line[1:]
				break
			}
			j := 0
			for j < len(line) && isNameByte(line[j], j == 0) {
				j++
			}
			if j == 0 {
				return s, false
			}
			name := line[:j]
			line = strings.TrimLeft(line[j:], " \t")
			if !strings.HasPrefix(line, "=") {
				return s, false
			}
			line = strings.TrimLeft(line[1:], " \t")
			if !strings.HasPrefix(line, `"`) {
				return s, false
			}
			var val strings.Builder
			j = 1
			closed := false
			for j < len(line) {
				c := line[j]
				if c == '"' {
					closed = true
					j++
					break
				}
				if c == '\\' && j+1 < len(line) {
					j++
					switch line[j] {
					case 'n':
						val.WriteByte('\n')
					case '\\', '"':
						val.WriteByte(line[j])
					default: // not an escape the format defines: keep it as written
						val.WriteByte('\\')
						val.WriteByte(line[j])
					}
					j++
					continue
				}
				val.WriteByte(c)
				j++
			}
			if !closed {
				return s, false
			}
			s.labels = append(s.labels, promLabel{name, val.String()})
			line = strings.TrimLeft(line[j:], " \t")
			if strings.HasPrefix(line, ",") {
				line = line[1:]
			} else if !strings.HasPrefix(line, "}") {
				return s, false
			}
		}
	}
	fields := strings.Fields(line)
	if len(fields) == 0 || len(fields) > 2 {
		return s, false
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return s, false
	}
	s.value = v
	return s, true
}

// How each metric is combined over the ranks of one server. A series'
// labels other than tp_rank, pp_rank and moe_ep_rank name one scheduler
// (its dp_rank, when the server runs data-parallel) or one tokenizer
// process; the ranks inside it are the same scheduler seen from each GPU
// of its tensor/pipeline/expert group, so they repeat one value (by
// default only tp_rank 0 reports; --enable-metrics-for-all-schedulers
// makes every rank report the same numbers). So: within such a group the
// lowest rank's value is taken, never a sum; across groups (dp ranks),
// per metric:
//   - requests running and queued, decode throughput and the token and
//     request counters are summed: each dp rank serves its own requests;
//   - token usage, cache hit rate and accept length are averaged: each is
//     a ratio of a dp rank's own pool or requests, and the dp ranks are
//     replicas of one size, so the mean is the server's ratio (for token
//     usage exactly; for the rates, weighted by no count /metrics gives);
//   - the process start time is the latest: any later start is a restart.
type combine uint8

const (
	combineSum combine = iota
	combineMean
	combineMax
)

var scrapedMetrics = map[string]struct {
	m   store.Metric
	how combine
}{
	"sglang:num_running_reqs":        {store.MetricRunning, combineSum},
	"sglang:num_queue_reqs":          {store.MetricQueued, combineSum},
	"sglang:token_usage":             {store.MetricTokenUsage, combineMean},
	"sglang:cache_hit_rate":          {store.MetricCacheHitRate, combineMean},
	"sglang:gen_throughput":          {store.MetricGenThroughput, combineSum},
	"sglang:generation_tokens_total": {store.MetricGenTokens, combineSum},
	"sglang:prompt_tokens_total":     {store.MetricPromptTokens, combineSum},
	"sglang:spec_accept_length":      {store.MetricAcceptLength, combineMean},
	"sglang:num_requests_total":      {store.MetricRequests, combineSum},
	"process_start_time_seconds":     {store.MetricStartTime, combineMax},
}

// rankLabels are the labels of the GPUs that one scheduler spans.
var rankLabels = []string{"tp_rank", "pp_rank", "moe_ep_rank"}

// readMetrics fills s with the server's metrics from its /metrics samples,
// combined over its ranks (see combine). A metric the server does not
// report stays unknown in s.
func readMetrics(samples []promSample, s *store.ServerSample) {
	type pick struct {
		rank  [3]int64
		value float64
	}
	groups := map[string]map[string]pick{} // metric name -> group -> lowest rank's value
	for i := range samples {
		p := &samples[i]
		if _, ok := scrapedMetrics[p.name]; !ok {
			continue
		}
		var key strings.Builder
		var rank [3]int64
		labels := slices.Clone(p.labels)
		slices.SortFunc(labels, func(a, b promLabel) int { return strings.Compare(a.name, b.name) })
		for _, l := range labels {
			if r := slices.Index(rankLabels, l.name); r >= 0 {
				n, err := strconv.ParseInt(l.value, 10, 64)
				if err != nil {
					n = math.MaxInt64
				}
				rank[r] = n
				continue
			}
			key.WriteString(l.name)
			key.WriteByte('=')
			key.WriteString(strconv.Quote(l.value))
			key.WriteByte(',')
		}
		g := groups[p.name]
		if g == nil {
			g = map[string]pick{}
			groups[p.name] = g
		}
		k := key.String()
		if old, ok := g[k]; !ok || slices.Compare(rank[:], old.rank[:]) < 0 {
			g[k] = pick{rank, p.value}
		}
	}
	for name, g := range groups {
		how := scrapedMetrics[name]
		var v float64
		for k, p := range g {
			if math.IsNaN(p.value) || math.IsInf(p.value, 0) {
				delete(g, k) // that scheduler has no value (NaN: nothing to measure yet)
				continue
			}
			switch how.how {
			case combineMax:
				v = max(v, p.value)
			default:
				v += p.value
			}
		}
		if len(g) == 0 {
			continue
		}
		if how.how == combineMean {
			v /= float64(len(g))
		}
		s.Set(how.m, v)
	}
}

// metricsURL is base's /metrics, keeping base's query string (which may
// carry credentials: it is never printed).
func metricsURL(base string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + "/metrics"
	u.RawPath = ""
	return u.String(), nil
}

// errNoMetrics: /metrics answered 404.
var errNoMetrics = errors.New("no /metrics")

// fetchMetrics reads url's /metrics. Its errors never hold the URL (which
// may carry credentials).
func fetchMetrics(ctx context.Context, hc *http.Client, target, apiKey string) ([]promSample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, errors.New("bad server URL")
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBody))
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, errNoMetrics
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	case err != nil:
		return nil, err
	}
	samples, _ := parseProm(body, func(name string) bool { _, ok := scrapedMetrics[name]; return ok })
	return samples, nil
}
