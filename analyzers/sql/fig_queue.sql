-- The queueing delays of run $run_id's data packets that left the
-- bottleneck queue in the window [$t0_ns, $t1_ns], on the figure's time
-- axis (seconds after $origin_ns): flow, departure time, delay in ms and
-- the packets queued behind it.
SELECT flow, (departed_ns - $origin_ns) / 1e9 AS t_s, delay_us / 1e3 AS delay_ms,
       backlog_packets
FROM queue_delays
WHERE run_id = $run_id AND departed_ns BETWEEN $t0_ns AND $t1_ns
ORDER BY departed_ns
