-- The bottleneck's queueing delay over run $run_id's data packets
-- (queue_delays): how many were matched, the 50th, 95th and 99th
-- percentiles and the largest delay in ms, and the largest queue a packet
-- left behind (packets, bytes). No row when the run has none.
SELECT count(*) AS packets,
       quantile_cont(delay_us, 0.5) / 1e3 AS p50_ms,
       quantile_cont(delay_us, 0.95) / 1e3 AS p95_ms,
       quantile_cont(delay_us, 0.99) / 1e3 AS p99_ms,
       max(delay_us) / 1e3 AS max_ms,
       max(backlog_packets) AS backlog_max_packets, max(backlog_bytes) AS backlog_max_bytes
FROM queue_delays
WHERE run_id = $run_id
HAVING count(*) > 0
