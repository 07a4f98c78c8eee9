-- Per run of $run_ids and per variant among its flows: iperf3's rates of
-- that variant's flows summed, and the share of the bottleneck their
-- throughput took (percent of the bottleneck rate): a variant's part of a
-- mixed run, as Kinicki's "average transfer rate" and "average link
-- utilization" per mechanism.
-- Parameter: $run_ids (INTEGER[]).
SELECT run_id, cc,
       sum(iperf_bps) / 1e6 AS iperf3_mbps,
       100 * sum(throughput_bps) / any_value(bw_bps) AS utilization_pct
FROM flow_rates
WHERE list_contains($run_ids::INTEGER[], run_id)
GROUP BY run_id, cc
ORDER BY run_id, cc
