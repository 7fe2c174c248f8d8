package gen

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"gendex/store"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// Getting a server's /metrics over HTTP: its URL, the answers that say it
// serves none (and what to do to have them), and the body read into a
// reading.

// maxMetricsBody bounds what is read of one /metrics answer (SGLang's, with
// its histograms for every rank, is some hundreds of KB).
const maxMetricsBody = 16 << 20

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

// errNoMetrics: the server serves no /metrics (see noMetricsError).
var errNoMetrics = errors.New("no /metrics")

// noMetricsError: /metrics answered 404 (SGLang without --enable-metrics,
// a router in front, another server) or 501 (llama-server without
// --metrics: not_supported_error). It is errNoMetrics.
type noMetricsError struct {
	status int
	flavor store.Flavor // FlavorLlamaCpp: its 501 not_supported_error; else not told
}

func (e *noMetricsError) Error() string { return fmt.Sprintf("no /metrics (HTTP %d)", e.status) }

func (e *noMetricsError) Is(target error) bool { return target == errNoMetrics }

// hint is what to do to have the metrics.
func (e *noMetricsError) hint() string {
	switch {
	case e.flavor == store.FlavorLlamaCpp:
		return "start llama-server with --metrics"
	case e.status == http.StatusNotFound:
		return "start the server with --enable-metrics (SGLang; a router or sgl-model-gateway in front serves none of its workers' /metrics)"
	}
	return "this server does not serve them"
}

// startTimeHeader is where llama-server puts its start (see
// reading.startHeader).
const startTimeHeader = "Process-Start-Time-Unix"

// fetchMetrics reads url's /metrics: the samples of the names some flavor
// reads, combined into a reading. Its errors never hold the URL (which may
// carry credentials).
func fetchMetrics(ctx context.Context, hc *http.Client, target, apiKey string) (*reading, error) {
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
		return nil, &noMetricsError{status: resp.StatusCode}
	case resp.StatusCode == http.StatusNotImplemented:
		e := &noMetricsError{status: resp.StatusCode}
		if bytes.Contains(body, []byte("not_supported_error")) {
			e.flavor = store.FlavorLlamaCpp
		}
		return nil, e
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	case err != nil:
		return nil, err
	}
	samples, _ := parseProm(body, func(name string) bool { return readNames[name] })
	r := readExposition(samples)
	r.startHeader = strings.TrimSpace(resp.Header.Get(startTimeHeader))
	return r, nil
}
