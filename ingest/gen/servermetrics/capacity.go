package servermetrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
)

// Stated is what an SGLang server states of its capacity.
type Stated struct {
	// Running is the requests it runs at once: max_running_requests, the
	// flag's value, else (it is often null: the server sizes it from its
	// KV pool) the sum over its data-parallel ranks of internal_states'
	// effective_max_running_requests_per_dp.
	Running int
	// PoolTokens is its KV pool in tokens (0: not stated): the top-level
	// max_total_num_tokens (a scheduler's, so one data-parallel rank's)
	// times dp_size.
	PoolTokens int
}

// StatedCapacity reads what an SGLang server states of its capacity from
// its GET /server_info (/get_server_info before v0.5.6; sglang-api.md §5).
// base is the server's root URL (its query string kept: it may carry
// credentials, and is never printed); apiKey, when set, is sent as a
// bearer token. It returns an error when the server tells no Running.
func StatedCapacity(ctx context.Context, hc *http.Client, base, apiKey string) (Stated, error) {
	var last error
	for _, path := range []string{"/server_info", "/get_server_info"} {
		st, err := statedAt(ctx, hc, base, path, apiKey)
		if err == nil {
			return st, nil
		}
		last = err
	}
	return Stated{}, last
}

func statedAt(ctx context.Context, hc *http.Client, base, path, apiKey string) (Stated, error) {
	target, err := routeURL(base, path)
	if err != nil {
		return Stated{}, errors.New("bad server URL")
	}
	resp, body, err := get(ctx, hc, target, apiKey, "")
	switch {
	case resp == nil:
		return Stated{}, err
	case resp.StatusCode != http.StatusOK:
		return Stated{}, fmt.Errorf("%s: HTTP %d", path, resp.StatusCode)
	case err != nil:
		return Stated{}, err
	}
	return capacityOf(body)
}

// capacityOf reads a /server_info body (see StatedCapacity).
func capacityOf(body []byte) (Stated, error) {
	var info struct {
		MaxRunning     *float64 `json:"max_running_requests"`
		Pool           *float64 `json:"max_total_num_tokens"`
		DPSize         *float64 `json:"dp_size"`
		InternalStates []struct {
			PerDP *float64 `json:"effective_max_running_requests_per_dp"`
		} `json:"internal_states"`
	}
	if err := json.Unmarshal(body, &info); err != nil {
		return Stated{}, fmt.Errorf("server_info: %v", err)
	}
	var st Stated
	if info.Pool != nil && *info.Pool >= 1 {
		st.PoolTokens = int(*info.Pool)
		if info.DPSize != nil && *info.DPSize > 1 {
			st.PoolTokens *= int(*info.DPSize)
		}
	}
	if info.MaxRunning != nil && *info.MaxRunning >= 1 {
		st.Running = int(*info.MaxRunning)
		return st, nil
	}
	for _, s := range info.InternalStates {
		if s.PerDP != nil && *s.PerDP >= 1 {
			st.Running += int(*s.PerDP)
		}
	}
	if st.Running == 0 {
		return Stated{}, errors.New("server_info tells no max_running_requests")
	}
	return st, nil
}
