-- The short flows of run $run_id (--short) that began in the window
-- [$t0_ns, $t1_ns]: their size, their start on the figure's time axis
-- (seconds after $origin_ns) and their completion time in ms, NULL for a
-- transfer that did not complete or was not found in the capture.
SELECT bytes, (start_ns - $origin_ns) / 1e9 AS t_s,
       if(outcome = 'complete', fct_ms, NULL) AS fct_ms
FROM short_flows
WHERE run_id = $run_id AND start_ns BETWEEN $t0_ns AND $t1_ns
ORDER BY bytes, start_ns
