package servermetrics

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Stated is what a server states of its capacity.
type Stated struct {
	// Running is the requests it runs at once: llama.cpp's total_slots;
	// SGLang's max_running_requests, the flag's value, else (it is often
	// null: the server sizes it from its KV pool) the sum over its
	// data-parallel ranks of internal_states'
	// effective_max_running_requests_per_dp.
	Running int
	// PoolTokens is its KV pool in tokens (0: not stated): SGLang's
	// top-level max_total_num_tokens (a scheduler's, so one data-parallel
	// rank's) times dp_size; vLLM's in its /metrics (Reading.PoolTokens).
	PoolTokens int
}

// CapacityOf reads what a server states of its capacity in body: SGLang's
// /get_server_info (/server_info since v0.5.6, the same; sglang-api.md
// §5), or llama.cpp's /props, whose total_slots (its --parallel) is the
// requests it runs at once (tools/server/server-context.cpp, its props
// handler). It returns an error when the body tells no Running.
func CapacityOf(body []byte) (Stated, error) {
	var info struct {
		TotalSlots     *float64 `json:"total_slots"`
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
	if info.TotalSlots != nil && *info.TotalSlots >= 1 {
		return Stated{Running: int(*info.TotalSlots)}, nil // each slot has its own context: no pool
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
