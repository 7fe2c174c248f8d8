package query

// Sink receives an answer as it is computed: Columns once, then the rows,
// then optionally a Total; or, for show, a single Line. Rows are streamed so
// that a million missing ids never sit in memory at once. Note, at any
// point, is a sentence about the answer for the person who asked (missing:
// answers that cannot be matched to prompts): never part of the data, so
// a writer shows it apart from the rows (format.Writer: on stderr).
type Sink interface {
	Columns(cols []string) error
	Row(row []any) error
	Total(row []any) error
	Line(line []byte) error
	Note(note string) error
}

// Collect is a Sink that keeps the whole answer as a Result.
type Collect struct{ Result Result }

func (c *Collect) Columns(cols []string) error { c.Result.Columns = cols; return nil }
func (c *Collect) Row(row []any) error {
	c.Result.Rows = append(c.Result.Rows, append([]any(nil), row...))
	return nil
}
func (c *Collect) Total(row []any) error  { c.Result.Total = append([]any(nil), row...); return nil }
func (c *Collect) Line(line []byte) error { c.Result.Line = append([]byte{}, line...); return nil }
func (c *Collect) Note(note string) error { c.Result.Notes = append(c.Result.Notes, note); return nil }

// Replay sends a collected Result to a Sink.
func Replay(r *Result, s Sink) error {
	for _, n := range r.Notes {
		if err := s.Note(n); err != nil {
			return err
		}
	}
	if r.Line != nil {
		return s.Line(r.Line)
	}
	if err := s.Columns(r.Columns); err != nil {
		return err
	}
	for _, row := range r.Rows {
		if err := s.Row(row); err != nil {
			return err
		}
	}
	if r.Total != nil {
		return s.Total(r.Total)
	}
	return nil
}
