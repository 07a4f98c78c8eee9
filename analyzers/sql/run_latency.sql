-- The latency probe of one run ($run_id, --latency): its tool, the
-- requests it sent, the percentage unanswered (and, by irtt, lost on the
-- way up or down), and over the answered ones the round trip's and (irtt)
-- each way's delay: minimum, mean and the 50th, 95th and 99th percentiles
-- (linear interpolation between the ordered samples), in ms. No row for a
-- run without the probe.
SELECT any_value(tool) AS tool, count(*) AS samples,
       100 * count(*) FILTER (WHERE lost IS NOT NULL) / count(*) AS loss_pct,
       count(*) FILTER (WHERE lost = 'up') AS lost_up,
       count(*) FILTER (WHERE lost = 'down') AS lost_down,
       min(rtt_us) / 1e3 AS rtt_min_ms, avg(rtt_us) / 1e3 AS rtt_mean_ms,
       quantile_cont(rtt_us, 0.5) / 1e3 AS rtt_p50_ms,
       quantile_cont(rtt_us, 0.95) / 1e3 AS rtt_p95_ms,
       quantile_cont(rtt_us, 0.99) / 1e3 AS rtt_p99_ms,
       quantile_cont(up_us, 0.5) / 1e3 AS up_p50_ms,
       quantile_cont(up_us, 0.95) / 1e3 AS up_p95_ms,
       quantile_cont(down_us, 0.5) / 1e3 AS down_p50_ms,
       quantile_cont(down_us, 0.95) / 1e3 AS down_p95_ms
FROM latency
WHERE run_id = $run_id
HAVING count(*) > 0
