-- The bottleneck queue's backlog as the runner sampled it (`tc -s` every
-- 100 ms) in the window [$t0_ns, $t1_ns] of run $run_id, on the figure's
-- time axis (seconds after $origin_ns): packets queued.
SELECT (t_ns - $origin_ns) / 1e9 AS t_s, packets
FROM backlog_samples
WHERE run_id = $run_id AND t_ns BETWEEN $t0_ns AND $t1_ns
ORDER BY t_ns
