package store

import (
	"math"
	"path/filepath"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// TestServerSampleRoundTrip: every field and every subset of metrics comes
// back as stored; a corrupt value is an error, not a sample.
func TestServerSampleRoundTrip(t *testing.T) {
	s := ServerSample{Time: 1796137441996, Up: true, Scraped: true, Run: 1796137441000, LastSeen: 1796137441996,
		ClientTokens: 1 << 40, ClientAnswers: 7, ClientUnknown: 1}
	s.Set(MetricRunning, 121)
	s.Set(MetricTokenUsage, 0.873)
	s.Set(MetricGenTokens, 1.234567e9)
	s.Set(MetricStartTime, 1.7e9)
	var got ServerSample
	if err := decodeSample(s.encode(), &got); err != nil || got != s {
		t.Fatalf("%+v %v\nwant %+v", got, err, s)
	}
	if _, ok := got.Get(MetricQueued); ok {
		t.Error("queued known though never set")
	}
	if v, ok := got.Get(MetricTokenUsage); !ok || v != 0.873 {
		t.Errorf("token usage %v %v", v, ok)
	}
	n := ServerSample{NoMetrics: true}
	if err := decodeSample(n.encode(), &got); err != nil || got != n {
		t.Errorf("%+v %v", got, err)
	}
	b := s.encode()
	for _, bad := range [][]byte{nil, {9, 0}, b[:len(b)-1], append(append([]byte{}, b[:2]...), 0xff)} {
		if err := decodeSample(bad, &got); err == nil {
			t.Errorf("%x decoded", bad)
		}
	}
}

// TestSeriesAndEventsAbsent: a file without the series and events buckets
// (written before them, version 3 included, or by a run that read no
// server) answers with no servers and no events, read-only too; the first
// sample and event create them.
func TestSeriesAndEventsAbsent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g.db")
	db, err := Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.bolt.Update(func(btx *bolt.Tx) error { return btx.Bucket(bucketMeta).Put(keyVersion, []byte{3}) }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	ro, err := Open(path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	err = ro.View(func(v *View) error {
		if s := v.Servers(); s != nil {
			t.Errorf("servers %v", s)
		}
		if _, ok, err := v.LastServerSample("http://x"); ok || err != nil {
			t.Errorf("last sample: %v %v", ok, err)
		}
		n := 0
		v.ServerSamples("http://x", 0, math.MaxInt64/2, func(*ServerSample) error { n++; return nil })
		v.Events(0, func(*Event) error { n++; return nil })
		if n != 0 {
			t.Errorf("%d samples and events in a file without them", n)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ro.Close()

	db, err = Open(path, Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *Tx) error {
		for i, at := range []int64{5000, 1000, 1500, 3000} { // 1000 and 1500 share a second: the later one stays
			s := &ServerSample{Time: at, ClientAnswers: int64(i)}
			if err := tx.PutServerSample("http://x", s); err != nil {
				return err
			}
		}
		for _, e := range []Event{{Time: 2000, Name: "b"}, {Time: 1000, Name: "a", Server: "http://x", Detail: "d"}, {Time: 2000, Name: "c"}} {
			if err := tx.AddEvent(&e); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	db.View(func(v *View) error {
		var times []int64
		v.ServerSamples("http://x", 1, 5, func(s *ServerSample) error { times = append(times, s.Time); return nil })
		if len(times) != 3 || times[0] != 1500 || times[1] != 3000 || times[2] != 5000 {
			t.Errorf("samples at %v", times)
		}
		var names []string
		v.Events(1500, func(e *Event) error { names = append(names, e.Name); return nil })
		if len(names) != 2 || names[0] != "b" || names[1] != "c" {
			t.Errorf("events since 1.5 s: %v", names)
		}
		return nil
	})
}
