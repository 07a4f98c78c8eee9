-- How often two flows send together: the intervals in which each sent data
-- and those in which both did. Friendliness compares the two flows'
-- goodputs, which says little of flows that seldom share the path.
-- Parameters: $capture_id, $conns (UINTEGER[2]), $dirs (UTINYINT[2]).
WITH sent AS (
    SELECT bin,
           bool_or(conn = $conns[1] AND dir = $dirs[1]) AS first,
           bool_or(conn = $conns[2] AND dir = $dirs[2]) AS second
    FROM throughput
    WHERE capture_id = $capture_id AND bytes > 0
    GROUP BY bin
)
SELECT count(*) FILTER (WHERE first AND second) AS together,
       count(*) FILTER (WHERE first) AS first_bins,
       count(*) FILTER (WHERE second) AS second_bins
FROM sent
