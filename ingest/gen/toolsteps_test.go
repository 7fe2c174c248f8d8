package gen

import (
	"strings"
	"testing"
)

// TestToolStepErrorSaysWhere: a tool conversation's final error names the
// step it failed at and its user turn, as a plain conversation's names
// its turn. Before, it said only the server's message.
func TestToolStepErrorSaysWhere(t *testing.T) {
	t.Parallel()
	a := &asker{}
	j := &job{ds: &dsRun{}, p: &Prompt{ID: "agent-1"}, tc: &toolConv{steps: make([]toolStep, 2), u: 1, segs: make([][]toolResult, 3)}}
	res := a.jobError(j, 500, "boom", "http://gpu1")
	if want := `"error":"step 3 (user turn 2 of 3): boom"`; !strings.Contains(string(res.line), want) {
		t.Errorf("the error line %s does not hold %s", res.line, want)
	}
}
