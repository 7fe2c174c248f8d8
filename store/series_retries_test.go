package store

import "testing"

// TestServerSampleRetries: the retry fields come back as stored; a sample
// stored before they were kept (the values its last bytes) reads with
// none; a retry field cut short is an error.
func TestServerSampleRetries(t *testing.T) {
	s := ServerSample{Time: 1796137441996, Up: true, Run: 1796137441000, ClientTokens: 99,
		Retries: 152, InBackoff: 3, LastError: "HTTP 500 'Failed to parse input'", LastErrorAt: 1796137440123}
	s.Set(MetricRunning, 4)
	var got ServerSample
	if err := decodeSample(s.encode(), &got); err != nil || got != s {
		t.Fatalf("%+v %v\nwant %+v", got, err, s)
	}
	old := s
	old.Retries, old.InBackoff, old.LastError, old.LastErrorAt = 0, 0, "", 0
	b := old.encode()
	b = b[:len(b)-8] // three varints 0, an empty string, two spec and two limit varints 0: what a sample had before
	if err := decodeSample(b, &got); err != nil || got != old {
		t.Errorf("an older sample: %+v %v\nwant %+v", got, err, old)
	}
	// A sample stored before the spec counts were kept reads with none.
	spec := s
	spec.ClientSpecTokens, spec.ClientSpecVerify = 3000, 1234
	if err := decodeSample(spec.encode(), &got); err != nil || got != spec {
		t.Errorf("spec counts: %+v %v", got, err)
	}
	b = s.encode()
	if err := decodeSample(b[:len(b)-4], &got); err != nil || got != s {
		t.Errorf("a sample without spec counts: %+v %v\nwant %+v", got, err, s)
	}
	// gen's limit and in flight come back; a sample stored before them
	// reads with none (0: not known).
	lim := s
	lim.Limit, lim.InFlight = 1040, 1031
	if err := decodeSample(lim.encode(), &got); err != nil || got != lim {
		t.Errorf("limit: %+v %v", got, err)
	}
	b = lim.encode()
	if err := decodeSample(b[:len(b)-4], &got); err != nil || got != s {
		t.Errorf("a sample without a limit: %+v %v\nwant %+v", got, err, s)
	}
	full := s.encode()
	for _, cut := range []int{3, 7, len(s.LastError) + 3} {
		if err := decodeSample(full[:len(full)-cut], &got); err == nil {
			t.Errorf("cut by %d: decoded %+v", cut, got)
		}
	}
}
