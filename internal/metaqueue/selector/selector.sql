-- selector: the jobs a selection names (mqdel, mqsub --rerun, mqhold,
-- mqrls), read on the core's writer.

-- name: SelectIDs
-- The jobs a selector names, in the states given as one string (e.g.
-- 'WQ'). The selector's builder appends its other conditions with AND.
SELECT id FROM jobs WHERE instr(?, state) > 0;
