-- arrays: the listing's condition on the arrays table (the arrays module,
-- internal/metaqueue/arrays, keeps the others).

-- name: InArray
-- A condition's subquery on a listed job j: the array holding j.id is the one
-- with the greatest first id at or below it (an index lookup), if its last id
-- reaches it. The listing's builder puts it in NOT EXISTS (...) to collapse
-- arrays; it names j, so it is prepared only inside a query over jobs j.
SELECT 1 FROM arrays a
WHERE a.first_job = (SELECT max(first_job) FROM arrays WHERE first_job <= j.id) AND a.last_job >= j.id;
