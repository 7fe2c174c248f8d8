package store

import "strings"

// Closest returns the candidate nearest to name (a flag's, a file's): no
// more than two edits away, or one that begins with the other; "" when
// none is. It says what a mistyped name meant.
func Closest(name string, candidates []string) string {
	best, bestD := "", 3
	for _, c := range candidates {
		d := editDistance(strings.ToLower(name), strings.ToLower(c))
		if strings.HasPrefix(c, name) || strings.HasPrefix(name, c) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
