-- Jain's index per interval (eq. 1 of Callegari et al.) over chosen flows,
-- x_i = goodput of flow i in the interval. Only intervals in which every
-- chosen flow is active count (from the latest first data interval to the
-- earliest last one): a flow that has not started yet is not unfairly
-- treated. A flow that sent nothing in such an interval counts as 0.
-- Parameters: $capture_id, $conns (UINTEGER[]), $dirs (UTINYINT[]).
WITH chosen AS (
    SELECT unnest($conns::UINTEGER[]) AS conn, unnest($dirs::UTINYINT[]) AS dir
),
spans AS (
    SELECT t.conn, t.dir, min(t.bin) AS lo, max(t.bin) AS hi
    FROM throughput t JOIN chosen USING (conn, dir)
    WHERE t.capture_id = $capture_id AND t.bytes > 0
    GROUP BY ALL
),
overlap AS (
    SELECT max(lo) AS lo, min(hi) AS hi, count(*) AS flows FROM spans
),
-- the overlap's intervals that the series holds: all of them where it is
-- dense, and no grid of the whole span where it is sparse (a capture's
-- segments years apart: docs/analyze.md, Limits)
bins AS (
    SELECT DISTINCT t.bin
    FROM throughput t JOIN chosen USING (conn, dir), overlap o
    WHERE t.capture_id = $capture_id AND t.bin BETWEEN o.lo AND o.hi
      AND o.flows = (SELECT count(*) FROM chosen)
),
grid AS (
    SELECT b.bin, c.conn, c.dir FROM bins b, chosen c
),
x AS (
    SELECT g.bin, coalesce(t.goodput_bps, 0) AS x, t.t_s
    FROM grid g
    LEFT JOIN throughput t
      ON t.capture_id = $capture_id AND t.conn = g.conn AND t.dir = g.dir AND t.bin = g.bin
)
SELECT bin, max(t_s) AS t_s,
       sum(x) * sum(x) / nullif(count(*) * sum(x * x), 0) AS jain,
       sum(x) AS total_bps
FROM x
GROUP BY bin
ORDER BY bin
