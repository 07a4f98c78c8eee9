-- Throughput series of one capture from its sums (tv_sums: conn, dir, bin,
-- packets, bytes, unique_bytes; a bin may have several rows), on the
-- capture's time base (bin 0 starts at its first record), laid out as
-- tv_shape says (throughput_shape.sql). A dense direction has every interval
-- between its first and last data interval, so a stall (a timeout, a zero
-- window) shows as zeros, not as a gap; a sparse one only its intervals with
-- data and the empty interval on each side of them, so a stall still shows as
-- zeros at its edges. Intervals past the largest INTEGER are left out.
-- Parameters: $capture_id, $interval_ns::BIGINT.
INSERT INTO throughput
WITH sums AS (
    SELECT conn, dir, bin::BIGINT AS bin, sum(packets) AS packets, sum(bytes) AS bytes,
           sum(unique_bytes) AS unique_bytes
    FROM tv_sums
    GROUP BY ALL
),
grid AS (
    SELECT s.conn, s.dir, r.range AS bin
    FROM tv_shape s, LATERAL range(s.lo, CASE WHEN s.dense THEN s.hi + 1 ELSE s.lo END) r
    UNION ALL
    SELECT DISTINCT x.conn, x.dir, x.bin + d.step AS bin
    FROM sums x JOIN tv_shape s USING (conn, dir), (VALUES (-1), (0), (1)) d(step)
    WHERE NOT s.dense AND x.bin + d.step BETWEEN s.lo AND s.hi
)
SELECT $capture_id, g.conn, g.dir, g.bin::INTEGER,
       g.bin::HUGEINT * $interval_ns::BIGINT / 1e9 AS t_s,
       coalesce(s.packets, 0), coalesce(s.bytes, 0), coalesce(s.unique_bytes, 0),
       8 * coalesce(s.bytes, 0) / ($interval_ns::BIGINT / 1e9),
       8 * coalesce(s.unique_bytes, 0) / ($interval_ns::BIGINT / 1e9)
FROM grid g LEFT JOIN sums s USING (conn, dir, bin)
WHERE g.bin <= 2147483647;
