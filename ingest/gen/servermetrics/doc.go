// Package servermetrics reads an inference server's own /metrics (SGLang
// with --enable-metrics, vLLM always, llama-server with --metrics): it
// fetches them over HTTP (Fetch, URL; a 404 or 501 is ErrNoMetrics, with
// the hint to have them), parses the Prometheus text format, tells the
// server's flavor by its names and combines each metric over the
// server's ranks into a Reading whose Fill gives a store.ServerSample
// that means the same for every flavor; RestartedSince tells a restart
// from two readings.
//
// It is pure reading: it keeps no state of a run (the reading before is
// the caller's to keep and hand back), writes nothing to the index, logs
// nothing and never retries. gen's scraper (ingest/gen/scrape.go) calls
// it on a schedule and stores the samples.
package servermetrics
