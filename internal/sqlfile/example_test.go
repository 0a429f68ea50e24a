package sqlfile_test

import (
	"fmt"

	"github.com/mq-hpc/mq/internal/sqlfile"
)

func ExampleParse() {
	q, err := sqlfile.Parse("sites.sql", `
-- name: SiteByName
SELECT id FROM sites WHERE name = ?;
`)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(q.Get("SiteByName"))
	// Output: SELECT id FROM sites WHERE name = ?;
}
