// Package metricstest holds /metrics answers as SGLang, vLLM and
// llama-server write them, for the tests of reading them (package
// servermetrics) and of gen's runs against servers that serve them.
package metricstest

// SGLang is /metrics as SGLang writes it (Python
// prometheus_client, multiprocess mode) for a server run with --dp-size 2
// --tp-size 2 and --enable-metrics-for-all-schedulers, so every scheduler
// metric comes once per tp rank of each dp rank, with the same value:
// summing over tp ranks would double it. The model name carries every
// escape of the format. Counters are tokenizer-side (no ranks) with their
// _created samples; a histogram's samples are there to be ignored.
const SGLang = `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 60.0
sglang:num_running_reqs{dp_rank="0",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 60.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 61.0
sglang:num_running_reqs{dp_rank="1",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 61.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{dp_rank="0",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 2.0
sglang:num_queue_reqs{dp_rank="0",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 2.0
sglang:num_queue_reqs{dp_rank="1",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 1.0
sglang:num_queue_reqs{dp_rank="1",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 1.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{dp_rank="0",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.8
sglang:token_usage{dp_rank="0",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 0.8
sglang:token_usage{dp_rank="1",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.6
sglang:token_usage{dp_rank="1",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 0.6
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{dp_rank="0",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 0.5
sglang:cache_hit_rate{dp_rank="1",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="0"} NaN
sglang:cache_hit_rate{dp_rank="1",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 0.25
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{dp_rank="0",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 650.5
sglang:gen_throughput{dp_rank="0",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 650.5
sglang:gen_throughput{dp_rank="1",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 666.5
sglang:gen_throughput{dp_rank="1",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="1"} 666.5
# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{dp_rank="0",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 3.2
sglang:spec_accept_length{dp_rank="1",engine_type="unified",model_name="org/\"Kimi\"\\K2.5\nbeta",moe_ep_rank="0",pp_rank="0",tp_rank="0"} 3.4
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{model_name="org/\"Kimi\"\\K2.5\nbeta"} 2.5e+06
sglang:prompt_tokens_created{model_name="org/\"Kimi\"\\K2.5\nbeta"} 1.7845920001234e+09
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{model_name="org/\"Kimi\"\\K2.5\nbeta"} 1.234567e+06
sglang:generation_tokens_created{model_name="org/\"Kimi\"\\K2.5\nbeta"} 1.7845920001234e+09
# HELP sglang:num_requests_total Number of requests processed.
# TYPE sglang:num_requests_total counter
sglang:num_requests_total{model_name="org/\"Kimi\"\\K2.5\nbeta"} 9500.0
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_bucket{le="0.1",model_name="org/\"Kimi\"\\K2.5\nbeta"} 3.0
sglang:time_to_first_token_seconds_bucket{le="+Inf",model_name="org/\"Kimi\"\\K2.5\nbeta"} 9500.0
sglang:time_to_first_token_seconds_count{model_name="org/\"Kimi\"\\K2.5\nbeta"} 9500.0
sglang:time_to_first_token_seconds_sum{model_name="org/\"Kimi\"\\K2.5\nbeta"} 1234.5
`

// VLLM is /metrics as vLLM's v1 engine writes it (Python
// prometheus_client: a counter NAME is written NAME_total, with a
// NAME_created beside it) for a server run with --data-parallel-size 2
// (label engine) and a speculative config. It is a copy from the time both
// names of the renamed metrics were written (kv_cache_usage_perc and the
// deprecated gpu_cache_usage_perc, prefix_cache_* and gpu_prefix_cache_*),
// the old ones with other values here, so that reading them instead shows.
// No process_start_time_seconds (multiprocess mode has none).
const VLLM = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="Qwen/Qwen3-8B"} 40.0
vllm:num_requests_running{engine="1",model_name="Qwen/Qwen3-8B"} 38.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="Qwen/Qwen3-8B"} 5.0
vllm:num_requests_waiting{engine="1",model_name="Qwen/Qwen3-8B"} 2.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.11
vllm:gpu_cache_usage_perc{engine="1",model_name="Qwen/Qwen3-8B"} 0.11
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="Qwen/Qwen3-8B"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="Qwen/Qwen3-8B"} 0.7
# HELP vllm:gpu_prefix_cache_queries GPU prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:gpu_prefix_cache_queries counter
vllm:gpu_prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-8B"} 1.0
vllm:gpu_prefix_cache_queries_total{engine="1",model_name="Qwen/Qwen3-8B"} 1.0
# HELP vllm:gpu_prefix_cache_hits GPU prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:gpu_prefix_cache_hits counter
vllm:gpu_prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 1.0
vllm:gpu_prefix_cache_hits_total{engine="1",model_name="Qwen/Qwen3-8B"} 0.0
# HELP vllm:prefix_cache_queries Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries counter
vllm:prefix_cache_queries_total{engine="0",model_name="Qwen/Qwen3-8B"} 6000.0
vllm:prefix_cache_queries_created{engine="0",model_name="Qwen/Qwen3-8B"} 1.7845920001234e+09
vllm:prefix_cache_queries_total{engine="1",model_name="Qwen/Qwen3-8B"} 4000.0
vllm:prefix_cache_queries_created{engine="1",model_name="Qwen/Qwen3-8B"} 1.7845920001234e+09
# HELP vllm:prefix_cache_hits Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits counter
vllm:prefix_cache_hits_total{engine="0",model_name="Qwen/Qwen3-8B"} 3000.0
vllm:prefix_cache_hits_total{engine="1",model_name="Qwen/Qwen3-8B"} 1000.0
# HELP vllm:prompt_tokens Number of prefill tokens processed.
# TYPE vllm:prompt_tokens counter
vllm:prompt_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 6000.0
vllm:prompt_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 4000.0
# HELP vllm:generation_tokens Number of generation tokens processed.
# TYPE vllm:generation_tokens counter
vllm:generation_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 70000.0
vllm:generation_tokens_created{engine="0",model_name="Qwen/Qwen3-8B"} 1.7845920001234e+09
vllm:generation_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 50000.0
# HELP vllm:request_success Count of successfully processed requests.
# TYPE vllm:request_success counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="Qwen/Qwen3-8B"} 90.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="Qwen/Qwen3-8B"} 10.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="Qwen/Qwen3-8B"} 0.0
vllm:request_success_total{engine="1",finished_reason="stop",model_name="Qwen/Qwen3-8B"} 50.0
# HELP vllm:spec_decode_num_drafts Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="Qwen/Qwen3-8B"} 1000.0
vllm:spec_decode_num_drafts_total{engine="1",model_name="Qwen/Qwen3-8B"} 1000.0
# HELP vllm:spec_decode_num_draft_tokens Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 4000.0
vllm:spec_decode_num_draft_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 4000.0
# HELP vllm:spec_decode_num_accepted_tokens Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="Qwen/Qwen3-8B"} 2500.0
vllm:spec_decode_num_accepted_tokens_total{engine="1",model_name="Qwen/Qwen3-8B"} 1500.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="Qwen/Qwen3-8B",position="0"} 900.0
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="Qwen/Qwen3-8B"} 0.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="Qwen/Qwen3-8B"} 100.0
`

// LlamaCpp is /metrics as llama-server (ggml-org/llama.cpp,
// tools/server: server-context.cpp's handler, the names of
// server-task.cpp) writes it with --metrics: no labels, values through
// C++'s ostream (6 significant digits, so big counters in exponent form),
// n_busy_slots_per_decode typed a counter though it is a mean. No KV use,
// no cached prompt tokens, no speculative counters: current builds have
// none of them.
const LlamaCpp = `# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 3.21457e+06
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total 235.743
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 96000
# HELP llamacpp:tokens_predicted_seconds_total Predict process time
# TYPE llamacpp:tokens_predicted_seconds_total counter
llamacpp:tokens_predicted_seconds_total 812.5
# HELP llamacpp:n_decode_total Total number of llama_decode() calls
# TYPE llamacpp:n_decode_total counter
llamacpp:n_decode_total 23381
# HELP llamacpp:n_tokens_max Largest observed n_tokens.
# TYPE llamacpp:n_tokens_max counter
llamacpp:n_tokens_max 511
# HELP llamacpp:n_busy_slots_per_decode Average number of busy slots per llama_decode() call
# TYPE llamacpp:n_busy_slots_per_decode counter
llamacpp:n_busy_slots_per_decode 7.25
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s.
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 424.925
# HELP llamacpp:predicted_tokens_seconds Average generation throughput in tokens/s.
# TYPE llamacpp:predicted_tokens_seconds gauge
llamacpp:predicted_tokens_seconds 118.154
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 8
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 24
`
