package schema

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemaDoc: docs/reference/schema.md shows the tables a new database
// has after every migration as `sqlite3 mq.db .schema` prints them (which
// writes a quoted table name's CREATE TABLE as CREATE TABLE IF NOT EXISTS),
// so an index or column a migration adds cannot be missing from it.
func TestSchemaDoc(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	c := conn(t)
	if err := Migrate(ctx, c); err != nil {
		t.Fatal(err)
	}
	rows, err := c.QueryContext(ctx, "SELECT sql FROM sqlite_schema WHERE sql IS NOT NULL ORDER BY rowid")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var have []string
	for rows.Next() {
		var q string
		if err := rows.Scan(&q); err != nil {
			t.Fatal(err)
		}
		have = append(have, q+";")
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile(filepath.Join("..", "..", "..", "docs", "reference", "schema.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(page), "## Tables after the last migration")
	_, block, ok2 := strings.Cut(after, "```sql\n")
	block, _, ok3 := strings.Cut(block, "\n```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("schema.md has no ```sql block under \"Tables after the last migration\"")
	}
	shown := strings.ReplaceAll(block, `CREATE TABLE IF NOT EXISTS "`, `CREATE TABLE "`)
	if want := strings.Join(have, "\n"); shown != want {
		t.Errorf("schema.md's tables are not a new database's; put this (sqlite3 mq.db .schema) in its block:\n%s", want)
	}
}
