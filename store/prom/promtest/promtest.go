// Package promtest checks Prometheus text with `promtool check metrics`,
// for the tests of the packages that serve /metrics.
package promtest

import (
	"bytes"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// Check runs `promtool check metrics` on text and fails t on any error or
// lint problem, except for problems allowed lists (whole lines of
// promtool's output, such as "sglang:num_requests_total metric names
// should not contain ':'" for SGLang's own names). It skips t when
// promtool is not installed (Debian's package prometheus ships it).
func Check(t testing.TB, text []byte, allowed ...string) {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (apt-get install prometheus)")
	}
	cmd := exec.Command(path, "check", "metrics")
	cmd.Stdin = bytes.NewReader(text)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return
	case errors.As(err, &exit) && exit.ExitCode() == 3: // lint problems only
		var problems []string
		for line := range strings.Lines(string(out)) {
			line = strings.TrimSpace(line)
			if line != "" && !slices.Contains(allowed, line) {
				problems = append(problems, line)
			}
		}
		if len(problems) == 0 {
			return
		}
		t.Errorf("promtool check metrics: %s\n%s", strings.Join(problems, "\n"), text)
	default:
		t.Errorf("promtool check metrics: %v: %s\n%s", err, out, text)
	}
}
