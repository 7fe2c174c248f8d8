package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// The servers' own view, read by gen from each server's /metrics every few
// seconds, is kept beside the records:
//
//	series/<server>/           unix second (big-endian uint64) -> ServerSample (binary, see encode)
//
// The bucket is created by the first sample a gen run stores, so a file
// written before it (schema 3 or 4) has none: every read below treats a
// missing bucket as an empty series. <server> is the server's URL as gen
// prints it (credentials redacted).
var bucketSeries = []byte("series")

// Metric names one value of a ServerSample that a server's /metrics may or
// may not give.
type Metric uint8

// The metrics a sample holds, summed or averaged over the server's ranks by
// gen (see ingest/gen/servermetrics/read.go, which names each one's source for
// SGLang, vLLM and llama.cpp; SGLang's is given here).
const (
	MetricRunning       Metric = iota // sglang:num_running_reqs
	MetricQueued                      // sglang:num_queue_reqs
	MetricTokenUsage                  // sglang:token_usage, 0-1
	MetricCacheHitRate                // sglang:cache_hit_rate, 0-1
	MetricGenThroughput               // sglang:gen_throughput, tokens/s
	MetricGenTokens                   // sglang:generation_tokens_total (counter)
	MetricPromptTokens                // sglang:prompt_tokens_total (counter)
	MetricAcceptLength                // sglang:spec_accept_length
	MetricRequests                    // sglang:num_requests_total (counter)
	MetricStartTime                   // process_start_time_seconds (Unix seconds)
	MetricSpecDrafts                  // vllm:spec_decode_num_drafts_total (counter; vLLM and llama.cpp)
	MetricSpecAccepted                // vllm:spec_decode_num_accepted_tokens_total (counter; vLLM and llama.cpp)
	MetricPreemptions                 // vllm:num_preemptions_total (counter; SGLang's retracted requests)
	NumMetrics
)

// ServerSample is one reading of one server.
type ServerSample struct {
	// Time is when it was taken (Unix ms); its key is the second.
	Time int64
	// Up is gen's view of the server then: in rotation (it answers) or
	// waited for.
	Up bool
	// Scraped: its /metrics answered, so the metrics it has are in Values.
	Scraped bool
	// Stalled: gen held requests on it that it replied to none of, past
	// gen's stall rule (gen's stalled event): up, but answering nothing.
	Stalled bool
	// NoMetrics: its /metrics answered 404 (the server runs without
	// --enable-metrics) or 501 (llama-server without --metrics).
	NoMetrics bool
	// Flavor is the server software its /metrics came from, told by the
	// metric names (or, with NoMetrics, by how it refused): it says why a
	// metric the sample lacks is unknown (that server does not expose it).
	Flavor Flavor
	// Run identifies the gen run that took it (the run's start, Unix ms):
	// the client counters below count from 0 in each run.
	Run int64
	// LastSeen is the last time (Unix ms) the server's /metrics answered,
	// in this sample or before; 0 if never.
	LastSeen int64
	// ClientTokens, ClientAnswers and ClientUnknown are gen's own counts,
	// since Run began, of the answers this server gave: their completion
	// tokens, the answers, and those without a token count.
	ClientTokens, ClientAnswers, ClientUnknown int64
	// Retries counts gen's attempts on this server, since Run began, that
	// failed and were sent again; InBackoff the prompts waiting then to be
	// sent again; LastError is the last such attempt's error, briefly
	// ("HTTP 500 'Failed to parse input'"), at LastErrorAt (Unix ms; 0 and
	// "" when none failed yet). Samples stored before these were kept have
	// none of them (read as 0 and "").
	Retries, InBackoff int64
	LastError          string
	LastErrorAt        int64
	// ClientSpecTokens and ClientSpecVerify are gen's own counts, since
	// Run began, of the completion tokens and verify steps of this server's
	// answers that carry spec_verify_ct (SGLang's meta_info): their ratio
	// over a window is the server's accept length then, from per-request
	// counts (see query's acceptSpan). 0 in samples stored before they were
	// kept.
	ClientSpecTokens, ClientSpecVerify int64
	// Limit is gen's limit then on the requests it keeps in flight on this
	// server (its capacity as gen found it, or its share of
	// --concurrency), and InFlight gen's requests in flight on it; 0 in
	// samples stored before they were kept (Limit 0: not known).
	Limit, InFlight int64

	has    uint16
	values [NumMetrics]float64
}

// Set stores a metric's value.
func (s *ServerSample) Set(m Metric, v float64) {
	if m < NumMetrics {
		s.values[m] = v
		s.has |= 1 << m
	}
}

// Get returns a metric's value; ok is false when the sample lacks it.
func (s *ServerSample) Get(m Metric) (v float64, ok bool) {
	if m >= NumMetrics || s.has&(1<<m) == 0 {
		return 0, false
	}
	return s.values[m], true
}

// Flavor is the kind of server a sample's /metrics came from.
type Flavor uint8

// The flavors gen tells apart by their /metrics names (sglang:*, vllm:*,
// llamacpp:*).
const (
	FlavorUnknown  Flavor = iota // not told: nothing read yet, or a sample stored before flavors were kept
	FlavorSGLang                 // sglang:* names
	FlavorVLLM                   // vllm:* names
	FlavorLlamaCpp               // llamacpp:* names, or a 501 not_supported_error for /metrics
	FlavorOther                  // its /metrics answered with none of those names (or its /v1/models names no flavor gendex knows)
	numFlavors
)

// String names the flavor for people.
func (f Flavor) String() string {
	switch f {
	case FlavorSGLang:
		return "SGLang"
	case FlavorVLLM:
		return "vLLM"
	case FlavorLlamaCpp:
		return "llama.cpp"
	case FlavorOther:
		return "an OpenAI-compatible server"
	}
	return "unknown"
}

const sampleVersion = 1

// The flags byte: three flags, then the flavor in bits 3-5 (a sample
// stored before flavors has 0 there: FlavorUnknown; a reader that predates
// them ignores those bits, so the version stays 1), then Stalled in bit 6
// (likewise: 0 before it was kept).
const (
	sampleUp = 1 << iota
	sampleScraped
	sampleNoMetrics
)

const (
	sampleFlavorShift = 3
	sampleFlavorMask  = 7 << sampleFlavorShift
	sampleStalled     = 1 << 6
)

func (s *ServerSample) encode() []byte {
	b := make([]byte, 0, 40+8*NumMetrics)
	var flags byte
	if s.Up {
		flags |= sampleUp
	}
	if s.Scraped {
		flags |= sampleScraped
	}
	if s.NoMetrics {
		flags |= sampleNoMetrics
	}
	if s.Flavor < numFlavors {
		flags |= byte(s.Flavor) << sampleFlavorShift
	}
	if s.Stalled {
		flags |= sampleStalled
	}
	b = append(b, sampleVersion, flags)
	for _, v := range [...]int64{s.Time, s.Run, s.LastSeen, s.ClientTokens, s.ClientAnswers, s.ClientUnknown} {
		b = binary.AppendVarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(s.has))
	for m := range NumMetrics {
		if s.has&(1<<m) != 0 {
			b = binary.BigEndian.AppendUint64(b, math.Float64bits(s.values[m]))
		}
	}
	// The retry fields follow the values, so that a sample without them
	// (stored before they were kept) still reads, and a reader that does
	// not know them reads the rest.
	for _, v := range [...]int64{s.Retries, s.InBackoff, s.LastErrorAt} {
		b = binary.AppendVarint(b, v)
	}
	b = binary.AppendUvarint(b, uint64(len(s.LastError)))
	b = append(b, s.LastError...)
	// The spec counts follow, for the same reason.
	for _, v := range [...]int64{s.ClientSpecTokens, s.ClientSpecVerify} {
		b = binary.AppendVarint(b, v)
	}
	// gen's limit and its requests in flight follow, for the same reason.
	for _, v := range [...]int64{s.Limit, s.InFlight} {
		b = binary.AppendVarint(b, v)
	}
	return b
}

var errBadSample = errors.New("corrupt server sample")

func decodeSample(b []byte, s *ServerSample) error {
	*s = ServerSample{}
	if len(b) < 2 || b[0] != sampleVersion {
		return errBadSample
	}
	flags := b[1]
	s.Up, s.Scraped, s.NoMetrics = flags&sampleUp != 0, flags&sampleScraped != 0, flags&sampleNoMetrics != 0
	s.Stalled = flags&sampleStalled != 0
	if f := Flavor(flags&sampleFlavorMask) >> sampleFlavorShift; f < numFlavors {
		s.Flavor = f
	}
	b = b[2:]
	for _, p := range [...]*int64{&s.Time, &s.Run, &s.LastSeen, &s.ClientTokens, &s.ClientAnswers, &s.ClientUnknown} {
		v, n := binary.Varint(b)
		if n <= 0 {
			return errBadSample
		}
		*p, b = v, b[n:]
	}
	has, n := binary.Uvarint(b)
	if n <= 0 || has >= 1<<NumMetrics {
		return errBadSample
	}
	b = b[n:]
	s.has = uint16(has)
	for m := range NumMetrics {
		if s.has&(1<<m) == 0 {
			continue
		}
		if len(b) < 8 {
			return errBadSample
		}
		s.values[m] = math.Float64frombits(binary.BigEndian.Uint64(b))
		b = b[8:]
	}
	if len(b) == 0 {
		return nil // stored before the retry fields were kept
	}
	for _, p := range [...]*int64{&s.Retries, &s.InBackoff, &s.LastErrorAt} {
		v, n := binary.Varint(b)
		if n <= 0 {
			return errBadSample
		}
		*p, b = v, b[n:]
	}
	l, n := binary.Uvarint(b)
	if n <= 0 || l > uint64(len(b)-n) {
		return errBadSample
	}
	s.LastError = string(b[n : n+int(l)])
	b = b[n+int(l):]
	if len(b) == 0 {
		return nil // stored before the spec counts were kept
	}
	for _, p := range [...]*int64{&s.ClientSpecTokens, &s.ClientSpecVerify} {
		v, n := binary.Varint(b)
		if n <= 0 {
			return errBadSample
		}
		*p, b = v, b[n:]
	}
	if len(b) == 0 {
		return nil // stored before gen's limit was kept
	}
	for _, p := range [...]*int64{&s.Limit, &s.InFlight} {
		v, n := binary.Varint(b)
		if n <= 0 {
			return errBadSample
		}
		*p, b = v, b[n:]
	}
	return nil
}

// PutServerSample stores s in server's series, under the second of
// s.Time (a later sample of the same second replaces an earlier one).
func (tx *Tx) PutServerSample(server string, s *ServerSample) error {
	if server == "" {
		return fmt.Errorf("server sample: empty server name")
	}
	top, err := tx.btx.CreateBucketIfNotExists(bucketSeries)
	if err != nil {
		return err
	}
	b, err := top.CreateBucketIfNotExists([]byte(server))
	if err != nil {
		return fmt.Errorf("server %s: %w", server, err)
	}
	b.FillPercent = 0.9 // keys only grow
	return b.Put(u64key(uint64(max(s.Time, 0)/1000)), s.encode())
}

// Servers returns the names of the servers that have a series, sorted.
func (v *View) Servers() []string {
	top := v.btx.Bucket(bucketSeries)
	if top == nil {
		return nil
	}
	var names []string
	c := top.Cursor()
	for k, val := c.First(); k != nil; k, val = c.Next() {
		if val == nil {
			names = append(names, string(k))
		}
	}
	return names
}

// ServerSamples calls fn, in time order, with server's samples whose
// second is in [from, to]; s is reused between calls.
func (v *View) ServerSamples(server string, from, to int64, fn func(s *ServerSample) error) error {
	top := v.btx.Bucket(bucketSeries)
	if top == nil {
		return nil
	}
	b := top.Bucket([]byte(server))
	if b == nil {
		return nil
	}
	hi := u64key(uint64(max(to, 0)))
	var s ServerSample
	c := b.Cursor()
	for k, val := c.Seek(u64key(uint64(max(from, 0)))); k != nil && bytes.Compare(k, hi) <= 0; k, val = c.Next() {
		if err := decodeSample(val, &s); err != nil {
			return fmt.Errorf("server %s second %d: %w", server, binary.BigEndian.Uint64(k), err)
		}
		if err := fn(&s); err != nil {
			return err
		}
	}
	return nil
}

// LastServerSample returns server's latest sample.
func (v *View) LastServerSample(server string) (ServerSample, bool, error) {
	var s ServerSample
	top := v.btx.Bucket(bucketSeries)
	if top == nil {
		return s, false, nil
	}
	b := top.Bucket([]byte(server))
	if b == nil {
		return s, false, nil
	}
	k, val := b.Cursor().Last()
	if k == nil {
		return s, false, nil
	}
	if err := decodeSample(val, &s); err != nil {
		return s, false, fmt.Errorf("server %s: %w", server, err)
	}
	return s, true, nil
}
