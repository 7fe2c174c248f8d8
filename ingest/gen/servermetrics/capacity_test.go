package servermetrics

import (
	"strings"
	"testing"

	"gendex/store"
)

// TestReadPreemptions: vLLM's num_preemptions (num_preemptions_total as
// prometheus_client writes a counter, the bare name in older copies) and
// SGLang's num_retracted_requests_total are the sample's preemptions,
// summed over the engines; a counter that goes back is a restart.
func TestReadPreemptions(t *testing.T) {
	for _, c := range []struct{ text, name string }{
		{`vllm:num_preemptions_total{engine="0",model_name="m"} 30.0
vllm:num_preemptions_total{engine="1",model_name="m"} 7.0
`, "vllm:num_preemptions_total"},
		{`vllm:num_preemptions{engine="0",model_name="m"} 37.0
`, "vllm:num_preemptions"},
		{`sglang:num_retracted_requests_total{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 37.0
sglang:num_retracted_requests_total{engine_type="unified",model_name="m",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 37.0
`, "sglang:num_retracted_requests_total"},
	} {
		r, s := readFixture(t, c.text, nil)
		if v, ok := s.Get(store.MetricPreemptions); !ok || v != 37 || r.names[keyPreempted] != c.name {
			t.Errorf("%s: preemptions %v %v from %q, want 37", c.name, v, ok, r.names[keyPreempted])
		}
		r2, _ := readFixture(t, strings.NewReplacer("37.0", "1.0", "30.0", "1.0").Replace(c.text), nil)
		if why := r2.RestartedSince(r); why == "" {
			t.Errorf("%s went back: no restart seen", c.name)
		}
	}
}

// TestCapacityOf: what a server states of its capacity: SGLang's
// max_running_requests when set, else its ranks' effective ones summed,
// and its KV pool (max_total_num_tokens, one rank's, times dp_size);
// llama.cpp's total_slots (no pool: each slot has its own context); an
// error when the body tells neither.
func TestCapacityOf(t *testing.T) {
	for _, c := range []struct {
		body string
		want Stated
	}{
		{`{"max_running_requests":512,"max_total_num_tokens":65536,"internal_states":[{"effective_max_running_requests_per_dp":100}]}`, Stated{512, 65536}},
		{`{"max_running_requests":null,"dp_size":2,"max_total_num_tokens":1000,"internal_states":[{"effective_max_running_requests_per_dp":300},{"effective_max_running_requests_per_dp":300}]}`, Stated{600, 2000}},
		{`{"max_running_requests":48}`, Stated{48, 0}},
		{`{"default_generation_settings":{"n_ctx":512},"total_slots":8,"model_path":"/m.gguf"}`, Stated{8, 0}},
		{`{"max_running_requests":null,"max_total_num_tokens":1000}`, Stated{}},
		{`{"model_path":"/m.gguf"}`, Stated{}},
	} {
		got, err := CapacityOf([]byte(c.body))
		if got != c.want || (err == nil) != (c.want.Running > 0) {
			t.Errorf("%s: %+v %v, want %+v", c.body, got, err, c.want)
		}
	}
}

// TestReadVLLMPool: vLLM states its KV pool in vllm:cache_config_info's
// labels (num_gpu_blocks × block_size); with data parallelism every
// engine's series carries the front end's sum, so it is read once, not
// added; a series without the numbers states nothing, and another
// flavor's /metrics none.
func TestReadVLLMPool(t *testing.T) {
	const running = "vllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3\n"
	info := func(engine, blocks, size string) string {
		return `vllm:cache_config_info{block_size="` + size + `",cache_dtype="auto",enable_prefix_caching="True",engine="` + engine +
			`",gpu_memory_utilization="0.9",num_gpu_blocks="` + blocks + `",num_gpu_blocks_override="None"} 1.0` + "\n"
	}
	for _, c := range []struct {
		what, text string
		want       int
	}{
		{"one engine", running + info("0", "2048", "16"), 32768},
		{"two engines, the sum on each", running + info("0", "4096", "16") + info("1", "4096", "16"), 65536},
		{"blocks not yet known", running + info("0", "None", "16"), 0},
		{"no cache_config_info", running, 0},
		{"SGLang's names", "sglang:num_running_reqs 3\n" + info("0", "2048", "16"), 0},
	} {
		if got := Read([]byte(c.text)).PoolTokens(); got != c.want {
			t.Errorf("%s: pool %d tokens, want %d", c.what, got, c.want)
		}
	}
}
