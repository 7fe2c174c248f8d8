package store

import "testing"

// TestServerSampleFlavor: a sample keeps the flavor of the server it read,
// in the flags byte; a sample stored before flavors (those bits 0) reads
// as FlavorUnknown with the rest as stored.
func TestServerSampleFlavor(t *testing.T) {
	for f := FlavorUnknown; f < numFlavors; f++ {
		s := ServerSample{Time: 1796137441996, Up: true, Scraped: true, NoMetrics: f == FlavorLlamaCpp, Flavor: f}
		s.Set(MetricRunning, 3)
		var got ServerSample
		if err := decodeSample(s.encode(), &got); err != nil || got != s {
			t.Errorf("flavor %v: %+v %v", f, got, err)
		}
	}
	s := ServerSample{Up: true, Scraped: true, Flavor: FlavorVLLM}
	b := s.encode()
	b[1] &^= sampleFlavorMask // as written before flavors were kept
	var got ServerSample
	if err := decodeSample(b, &got); err != nil || got.Flavor != FlavorUnknown || !got.Up || !got.Scraped {
		t.Errorf("%+v %v", got, err)
	}
	if FlavorLlamaCpp.String() != "llama.cpp" || FlavorVLLM.String() != "vLLM" || FlavorSGLang.String() != "SGLang" {
		t.Error("names")
	}
}

// TestServerSampleStalled: a sample keeps whether gen found its server
// stalled, beside the flavor, and one stored before Stalled was kept
// reads as not stalled with its flavor as stored.
func TestServerSampleStalled(t *testing.T) {
	s := ServerSample{Time: 1796137441996, Up: true, Scraped: true, Stalled: true, Flavor: FlavorLlamaCpp}
	var got ServerSample
	if err := decodeSample(s.encode(), &got); err != nil || got != s {
		t.Fatalf("%+v %v", got, err)
	}
	b := s.encode()
	b[1] &^= sampleStalled // as written before Stalled was kept
	if err := decodeSample(b, &got); err != nil || got.Stalled || got.Flavor != FlavorLlamaCpp || !got.Up {
		t.Errorf("%+v %v", got, err)
	}
}
