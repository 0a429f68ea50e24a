-- tokens: submit idempotency tokens (the submits table), kept for a while
-- after their commit.

-- name: ByToken
SELECT first, count FROM submits WHERE token = ?;

-- name: InsertSubmit
INSERT INTO submits (token, first, count, created) VALUES (?, ?, ?, ?);

-- name: Expire
DELETE FROM submits WHERE created < ?;
