package servermetrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// StatedCapacity reads the requests an SGLang server says it runs at
// once from its GET /server_info (/get_server_info before v0.5.6;
// sglang-api.md §5): max_running_requests, the flag's value, else (it is
// often null: the server sizes it from its KV pool) the sum over its
// data-parallel ranks of internal_states' effective_max_running_requests
// _per_dp. base is the server's root URL (its query string kept: it may
// carry credentials, and is never printed); apiKey, when set, is sent as
// a bearer token. It returns 0 and an error when the server tells
// neither.
func StatedCapacity(ctx context.Context, hc *http.Client, base, apiKey string) (int, error) {
	var last error
	for _, path := range []string{"/server_info", "/get_server_info"} {
		n, err := statedAt(ctx, hc, base, path, apiKey)
		if err == nil {
			return n, nil
		}
		last = err
	}
	return 0, last
}

func statedAt(ctx context.Context, hc *http.Client, base, path, apiKey string) (int, error) {
	u, err := url.Parse(base)
	if err != nil {
		return 0, errors.New("bad server URL")
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + path
	u.RawPath = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, errors.New("bad server URL")
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
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetricsBody))
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
	}
	if err != nil {
		return 0, err
	}
	return capacityOf(body)
}

// capacityOf reads a /server_info body (see StatedCapacity).
func capacityOf(body []byte) (int, error) {
	var info struct {
		MaxRunning     *float64 `json:"max_running_requests"`
		InternalStates []struct {
			PerDP *float64 `json:"effective_max_running_requests_per_dp"`
		} `json:"internal_states"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return 0, fmt.Errorf("server_info: %v", err)
	}
	if info.MaxRunning != nil && *info.MaxRunning >= 1 {
		return int(*info.MaxRunning), nil
	}
	n := 0
	for _, st := range info.InternalStates {
		if st.PerDP != nil && *st.PerDP >= 1 {
			n += int(*st.PerDP)
		}
	}
	if n == 0 {
		return 0, errors.New("server_info tells no max_running_requests")
	}
	return n, nil
}
