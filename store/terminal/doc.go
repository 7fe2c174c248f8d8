// Package terminal is what every gendex command knows about a terminal: its
// size now (Size) and when it changes (NotifyResize), the display width of
// text (Width), and text fitted to a width: cut with "…" (Cut, CutMiddle)
// or wrapped between words (Wrap; WrapLines for messages, commands in
// them kept runnable). It decides nothing: whether stdout is a terminal is
// main's one decision, and a caller with no terminal passes width 0.
//
// It sits under store/ because store/ is the bottom of the house: ingest
// (gen's live lines) and query (tables, plots) both use it, and neither may
// import the other. Like store, it imports nothing of gendex's.
package terminal
