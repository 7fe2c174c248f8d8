package main

// The exit statuses that are more than "it failed", for scripts: each
// names a kind of failure a cron tells apart without reading stderr.
// They are small numbers below 126 (which shells keep for "cannot run"
// and 128+N for "killed by signal N": gendex's 130, interrupted, is one)
// and clear of 2, the usage status of the flag package and of most Unix
// tools.
const (
	// exitNotFound: something asked for is not in the index: a dataset,
	// a record's id, a server (a typo, or the wrong index). The index
	// itself was read.
	exitNotFound = 3
	// exitNoIndex: there is no index at the path, or the file there
	// cannot be read as one (empty, damaged, another schema version, not
	// readable by this user): the index is lost or --db is wrong.
	exitNoIndex = 4
	// exitRefused: gen refused the command before sending anything (a
	// resume that would answer another way than the answers there, a
	// changed id rule, a tool dataset without a tool-call parser, ...):
	// the same command is refused again, so a script fixes it rather than
	// running it again. Its run is recorded as refused.
	exitRefused = 5
)

// exitStatuses is what 'gendex help' and README say of the exit status.
const exitStatuses = "Exit status: 0 ok, 1 error (or input lines left out), 2 usage, " +
	"3 not in the index (an unknown dataset, id or server), 4 no index (missing or unreadable), " +
	"5 refused (gen sent nothing: change the command; as it is, it is refused again), 130 interrupted."
