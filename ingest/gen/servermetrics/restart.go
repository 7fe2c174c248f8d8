package servermetrics

import (
	"fmt"
	"time"
)

// RestartedSince tells whether the server restarted between prev and r,
// two readings of one URL: a counter lower than before (under the same
// name), another process start time (process_start_time_seconds, or
// llama.cpp's Process-Start-Time-Unix header) or other names (another
// server behind the URL). why says which, as a restart event's detail;
// "" is no sign of one (nor is a nil prev).
func (r *Reading) RestartedSince(prev *Reading) (why string) {
	if prev == nil {
		return ""
	}
	if prev.flavor != r.flavor {
		return fmt.Sprintf("its /metrics now has %s's names (it had %s's)", r.flavor, prev.flavor)
	}
	for _, src := range flavorSources[r.flavor] {
		was, ok1 := prev.get(src.key)
		now, ok2 := r.get(src.key)
		if src.counter && ok1 && ok2 && now < was && prev.names[src.key] == r.names[src.key] {
			return fmt.Sprintf("%s went back from %.0f to %.0f", r.names[src.key], was, now)
		}
	}
	was, ok1 := prev.get(keyStart)
	now, ok2 := r.get(keyStart)
	if ok1 && ok2 && now != was {
		return fmt.Sprintf("its process start time changed from %s to %s",
			time.Unix(int64(was), 0).UTC().Format(time.RFC3339), time.Unix(int64(now), 0).UTC().Format(time.RFC3339))
	}
	if prev.startHeader != "" && r.startHeader != "" && prev.startHeader != r.startHeader {
		return fmt.Sprintf("its %s header changed from %s to %s (llama-server gives its start there)", StartTimeHeader, prev.startHeader, r.startHeader)
	}
	return ""
}
