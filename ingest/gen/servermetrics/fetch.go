package servermetrics

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"gendex/store"
)

// Getting a server's /metrics over HTTP: its URL, the answers that say it
// serves none (and what to do to have them), and the body read into a
// Reading.

// maxMetricsBody bounds what is read of one /metrics answer (SGLang's, with
// its histograms for every rank, is some hundreds of KB).
const maxMetricsBody = 16 << 20

// URL is base's /metrics, keeping base's query string (which may carry
// credentials: it is never printed).
func URL(base string) (string, error) { return routeURL(base, "/metrics") }

// routeURL is base's path route, keeping base's query string.
func routeURL(base, route string) (string, error) {
	u, err := url.Parse(base)
	if err != nil {
		return "", err
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + route
	u.RawPath = ""
	return u.String(), nil
}

// ErrNoMetrics: the server serves no /metrics (Fetch's *NoMetricsError is
// it).
var ErrNoMetrics = errors.New("no /metrics")

// NoMetricsError: /metrics answered 404 (SGLang without --enable-metrics,
// a router in front, another server) or 501 (llama-server without
// --metrics: not_supported_error). It is ErrNoMetrics.
type NoMetricsError struct {
	Status int          // the HTTP status
	Flavor store.Flavor // FlavorLlamaCpp: its 501 not_supported_error; else not told
}

func (e *NoMetricsError) Error() string { return fmt.Sprintf("no /metrics (HTTP %d)", e.Status) }

// Is says e is ErrNoMetrics.
func (e *NoMetricsError) Is(target error) bool { return target == ErrNoMetrics }

// Hint is what to do to have the metrics.
func (e *NoMetricsError) Hint() string {
	switch {
	case e.Flavor == store.FlavorLlamaCpp:
		return "start llama-server with --metrics"
	case e.Status == http.StatusNotFound:
		return "start the server with --enable-metrics (SGLang; a router or sgl-model-gateway in front serves none of its workers' /metrics)"
	}
	return "this server does not serve them"
}

// StartTimeHeader is where llama-server puts its start (see
// Reading.startHeader).
const StartTimeHeader = "Process-Start-Time-Unix"

// Fetch reads target (a /metrics URL, see URL): the samples of the names
// some flavor reads, combined into a Reading. apiKey, when set, is sent
// as a bearer token. A 404 or a 501 is a *NoMetricsError; other errors
// are the transport's or "HTTP <status>", and never hold the URL (which
// may carry credentials).
func Fetch(ctx context.Context, hc *http.Client, target, apiKey string) (*Reading, error) {
	resp, body, err := get(ctx, hc, target, apiKey, "text/plain;version=0.0.4")
	if resp == nil {
		return nil, err
	}
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, &NoMetricsError{Status: resp.StatusCode}
	case resp.StatusCode == http.StatusNotImplemented:
		e := &NoMetricsError{Status: resp.StatusCode}
		if bytes.Contains(body, []byte("not_supported_error")) {
			e.Flavor = store.FlavorLlamaCpp
		}
		return nil, e
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("HTTP %d", resp.StatusCode)
	case err != nil:
		return nil, err
	}
	r := Read(body)
	r.startHeader = strings.TrimSpace(resp.Header.Get(StartTimeHeader))
	return r, nil
}

// get GETs target with apiKey as a bearer token (when set) and accept as
// its Accept header (when set), and reads at most maxMetricsBody of the
// answer. A nil response is a failure before any answer (err never holds
// the URL, which may carry credentials); with a response, err is the
// body's read error.
func get(ctx context.Context, hc *http.Client, target, apiKey, accept string) (*http.Response, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return nil, nil, errors.New("bad server URL")
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBody))
	return resp, body, err
}
