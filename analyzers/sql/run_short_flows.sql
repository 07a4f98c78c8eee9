-- Run $run_id's short flows per size class: how many were planned, how
-- many completed (and were found in the sender capture), were cut or never
-- connected, and the completion times of the completed ones in ms: the
-- 50th, 95th and 99th percentiles, the mean and the largest; beside them
-- the client's own median (connect() to the server's close).
SELECT bytes,
       count(*) AS transfers,
       count(*) FILTER (WHERE outcome = 'complete') AS complete,
       count(*) FILTER (WHERE outcome = 'cut') AS cut,
       count(*) FILTER (WHERE outcome IN ('never connected', 'failed')) AS not_connected,
       count(fct_ms) FILTER (WHERE outcome = 'complete') AS measured,
       quantile_cont(fct_ms, 0.5) FILTER (WHERE outcome = 'complete') AS fct_p50_ms,
       quantile_cont(fct_ms, 0.95) FILTER (WHERE outcome = 'complete') AS fct_p95_ms,
       quantile_cont(fct_ms, 0.99) FILTER (WHERE outcome = 'complete') AS fct_p99_ms,
       avg(fct_ms) FILTER (WHERE outcome = 'complete') AS fct_mean_ms,
       max(fct_ms) FILTER (WHERE outcome = 'complete') AS fct_max_ms,
       quantile_cont(app_fct_ms, 0.5) FILTER (WHERE outcome = 'complete') AS app_fct_p50_ms
FROM short_flows
WHERE run_id = $run_id
GROUP BY bytes
ORDER BY bytes
