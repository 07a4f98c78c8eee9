-- Per run of $run_ids and per variant among its flows: iperf3's rates of
-- that variant's flows summed, and the share of the bottleneck their data
-- took (percent of what the bottleneck carries from the run's first data
-- packet to its last, any flow's): a variant's part of a mixed run, as
-- Kinicki's "average transfer rate" and "average link utilization" per
-- mechanism. The shares of a run's variants add up to its utilisation.
-- Parameter: $run_ids (INTEGER[]).
WITH f AS (
    SELECT *, (max(data_last_ns) OVER run - min(data_first_ns) OVER run) / 1e9 AS span_s
    FROM flow_rates
    WHERE list_contains($run_ids::INTEGER[], run_id)
    WINDOW run AS (PARTITION BY run_id)
)
SELECT run_id, cc,
       sum(iperf_bps) / 1e6 AS iperf3_mbps,
       100 * 8 * sum(data_bytes) / nullif(any_value(span_s), 0) / any_value(bw_bps)
           AS utilization_pct
FROM f
GROUP BY run_id, cc
ORDER BY run_id, cc
