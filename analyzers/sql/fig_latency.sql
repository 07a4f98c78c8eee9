-- The latency probe's requests of run $run_id sent in the window
-- [$t0_ns, $t1_ns], on the figure's time axis (seconds after $origin_ns):
-- the round trip in ms, NULL for a request lost (`lost` says which way).
SELECT (sent_ns - $origin_ns) / 1e9 AS t_s, rtt_us / 1e3 AS rtt_ms, lost
FROM latency
WHERE run_id = $run_id AND sent_ns BETWEEN $t0_ns AND $t1_ns
ORDER BY sent_ns
