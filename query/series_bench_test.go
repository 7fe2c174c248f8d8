package query_test

import (
	"fmt"
	"io"
	"testing"

	"gendex/query"
	"gendex/query/format"
)

// BenchmarkSeries answers series over the benchmark index (benchDB: 10 M
// records, two hours of answers over 8 datasets) as `gendex query` does:
// 24 hours at the default step (12m: 120 rows per dataset), at 1m (1,440
// rows per dataset), and the two hours of answers second by second.
func BenchmarkSeries(b *testing.B) {
	db := benchDB(b)
	for _, args := range [][]string{
		{"series", "--since", "24h"},
		{"series", "--since", "24h", "--step", "1m"},
		{"series", "--since", "2h", "--step", "1s"},
	} {
		q, err := query.Parse(args)
		if err != nil {
			b.Fatal(err)
		}
		q.Resolve(false)
		b.Run(fmt.Sprint(args), func(b *testing.B) {
			for b.Loop() {
				out := format.NewWriter(io.Discard, format.Options{Format: q.Format})
				if err := query.Run(db, q, benchNow, out); err != nil {
					b.Fatal(err)
				}
				out.Close()
			}
		})
	}
}
