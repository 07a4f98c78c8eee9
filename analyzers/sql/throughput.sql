-- Throughput series of one capture: bytes per connection, direction and
-- interval, on the capture's time base (bin 0 starts at its first record).
-- Dense between each direction's first and last data interval, so a stall
-- (a timeout, a zero window) shows as zeros, not as a gap.
-- Parameters: $capture_id, $interval_ns::BIGINT.
INSERT INTO throughput
WITH start AS (
    SELECT first_ns FROM captures WHERE capture_id = $capture_id
),
sums AS (
    SELECT p.conn, p.dir,
           ((p.ts_ns - start.first_ns) // $interval_ns::BIGINT)::INTEGER AS bin,
           count(*) AS packets,
           sum(p.len) AS bytes,
           sum(CASE WHEN p.ev & 1 = 0 THEN p.len ELSE 0 END) AS unique_bytes
    FROM packets p, start
    WHERE p.capture_id = $capture_id AND p.len > 0
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
