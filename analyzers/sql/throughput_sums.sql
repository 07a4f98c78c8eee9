-- The throughput series' sums of one capture from its packets: data
-- segments, bytes and bytes not resent per connection, direction and
-- interval of the capture's time base (bin 0 starts at its first record).
-- `tcpvar analyze` gathers the same sums during its scan instead
-- (ingest/native/series.c). Parameters: $capture_id, $interval_ns::BIGINT.
CREATE OR REPLACE TEMP TABLE tv_sums AS
WITH start AS (
    SELECT first_ns FROM captures WHERE capture_id = $capture_id
)
SELECT p.conn, p.dir,
       (p.ts_ns - start.first_ns) // $interval_ns::BIGINT AS bin,
       count(*) AS packets,
       sum(p.len) AS bytes,
       sum(CASE WHEN p.ev & 1 = 0 THEN p.len ELSE 0 END) AS unique_bytes
FROM packets p, start
WHERE p.capture_id = $capture_id AND p.len > 0
GROUP BY ALL;
