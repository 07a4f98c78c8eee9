-- Throughput of chosen senders in bins of $bin_ns on a figure's time axis
-- (t = 0 at $origin_ns), between $t0_ns and $t1_ns: computed for the
-- figure, never stored over the capture's own series. Dense between each
-- sender's first and last data bin, so a stall shows as zeros.
-- Parameters: $capture_id, $conns (UINTEGER[]), $dirs (UTINYINT[]),
-- $origin_ns, $bin_ns, $t0_ns, $t1_ns.
WITH chosen AS (
    SELECT unnest($conns::UINTEGER[]) AS conn, unnest($dirs::UTINYINT[]) AS dir
), sums AS (
    SELECT p.conn, p.dir, (p.ts_ns - $origin_ns) // $bin_ns AS bin,
           sum(p.len) AS bytes,
           sum(CASE WHEN p.ev & 1 = 0 THEN p.len ELSE 0 END) AS unique_bytes
    FROM packets p JOIN chosen USING (conn, dir)
    WHERE p.capture_id = $capture_id AND p.len > 0 AND p.ts_ns BETWEEN $t0_ns AND $t1_ns
    GROUP BY ALL
), spans AS (
    SELECT conn, dir, min(bin) AS lo, max(bin) AS hi FROM sums GROUP BY ALL
), grid AS (
    SELECT s.conn, s.dir, r.range AS bin FROM spans s, LATERAL range(s.lo, s.hi + 1) r
)
SELECT g.conn, g.dir, g.bin * $bin_ns / 1e9 AS t_s,
       8 * coalesce(s.bytes, 0) / ($bin_ns / 1e9) AS bps,
       8 * coalesce(s.unique_bytes, 0) / ($bin_ns / 1e9) AS goodput_bps
FROM grid g LEFT JOIN sums s USING (conn, dir, bin)
ORDER BY g.conn, g.bin
