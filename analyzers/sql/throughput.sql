-- Throughput series of one capture from its sums (tv_sums: conn, dir, bin,
-- packets, bytes, unique_bytes; a bin may have several rows), on the
-- capture's time base (bin 0 starts at its first record). Dense between each
-- direction's first and last data interval, so a stall (a timeout, a zero
-- window) shows as zeros, not as a gap.
-- Parameters: $capture_id, $interval_ns::BIGINT.
INSERT INTO throughput
WITH sums AS (
    SELECT conn, dir, bin::INTEGER AS bin, sum(packets) AS packets, sum(bytes) AS bytes,
           sum(unique_bytes) AS unique_bytes
    FROM tv_sums
    GROUP BY ALL
),
spans AS (
    SELECT conn, dir, min(bin) AS lo, max(bin) AS hi FROM sums GROUP BY ALL
),
grid AS (
    SELECT s.conn, s.dir, r.range::INTEGER AS bin
    FROM spans s, LATERAL range(s.lo, s.hi + 1) r
)
SELECT $capture_id, g.conn, g.dir, g.bin,
       g.bin * $interval_ns::BIGINT / 1e9 AS t_s,
       coalesce(s.packets, 0), coalesce(s.bytes, 0), coalesce(s.unique_bytes, 0),
       8 * coalesce(s.bytes, 0) / ($interval_ns::BIGINT / 1e9),
       8 * coalesce(s.unique_bytes, 0) / ($interval_ns::BIGINT / 1e9)
FROM grid g LEFT JOIN sums s USING (conn, dir, bin);
