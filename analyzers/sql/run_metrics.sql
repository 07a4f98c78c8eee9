-- One row per run of $run_ids: the metrics `tcpvar compare` aggregates
-- across runs. Per flow as in the run summary (the sender capture's data
-- direction, rates over the flow's data transfer), then per run: the sum of
-- the flows' throughput (all data sent), goodput (data sent once) and
-- iperf3's rate (bytes its receiver counted); the system goodput (Psaras &
-- Tsaoussidis, eq. 8: the data all flows sent once over the run's span,
-- from the first flow's first data to the last one's last, which with
-- staggered flows, unlike the sum of the flows' rates, cannot exceed the
-- link); their retransmitted packets,
-- the mean of their average RTTs, the 95th percentile of all their RTT
-- samples (on the ACKs of their data: Pantheon's delay axis, as RTT),
-- Jain's index over their goodputs (two forward flows or more) and, in friendliness
-- runs, the test flows' mean goodput over the Reno background flow's, and
-- iperf3's rates of the background flow (the first, in fairness and
-- friendliness runs) and of the test flows (their mean): the paper's
-- "connection 1" and "connection 2", or "Reno" and the variant; the mean
-- of the flows' iperf3 rates, and in a parking lot the mean iperf3 rate of
-- the flows through every hop and of the cross flows; the link's utilisation (all data the forward
-- flows sent over the run's span, over the bottleneck rate; in a parking
-- lot the first hop's: the flows through every hop and its cross flows),
-- the packets the bottleneck queue dropped and those it marked CE (a parking
-- lot's: summed over its hops; the queues' own counters: RED's `marked`,
-- the CoDel and PIE family's `ecn_mark` and `ce_mark`, CAKE's per tin, fq's
-- `ce_mark`), and the CE-marked packets of the bottleneck capture (when it
-- carried ECN-capable packets); with the latency probe (--latency), the
-- 50th, 95th and 99th percentiles of its round trips and the percentage
-- of its requests unanswered (latency under load, as run_latency.sql);
-- the 50th, 95th and 99th percentiles of the queueing delay of the
-- flows' data packets at the bottleneck (queue_delays); with short flows
-- (--short), the 50th, 95th and 99th percentiles of the completion times
-- of one size class's completed transfers: $fct_bytes (BIGINT), or when
-- NULL the run's smallest class (the mice; the summary gives every class).
-- Parameters: $run_ids (INTEGER[]), $fct_bytes.
WITH per_flow AS (
    -- forward: the flow shares the forward bottleneck (runs before
    -- --reverse have no direction); first_hop: and its first hop, in a
    -- parking lot (a cross flow of another hop does not)
    SELECT r.*, f.hop, f.direction IS DISTINCT FROM 'reverse' AS forward,
           f.direction IS DISTINCT FROM 'reverse' AND coalesce(f.hop, 1) = 1 AS first_hop
    FROM flow_rates r JOIN flows f USING (run_id, flow)
    WHERE list_contains($run_ids::INTEGER[], r.run_id)
), span AS (
    SELECT run_id, (max(data_last_ns) - min(data_first_ns)) / 1e9 AS span_s
    FROM per_flow
    GROUP BY run_id
), rtt AS (
    SELECT f.run_id, quantile_cont(p.rtt_us, 0.95) / 1e3 AS rtt_p95_ms
    FROM per_flow f
    JOIN packets p ON p.capture_id = f.capture_id AND p.conn = f.conn AND p.dir <> f.dir
    WHERE p.rtt_us IS NOT NULL
    GROUP BY f.run_id
), queue AS (
    SELECT run_id, sum(drops) AS bottleneck_drops,
           sum(CASE WHEN kind IN ('red', 'codel', 'fq_codel', 'pie', 'fq_pie', 'cake', 'fq')
                THEN coalesce(TRY_CAST(xstats ->> '$.marked' AS BIGINT), 0)
                     + coalesce(TRY_CAST(xstats ->> '$.ecn_mark' AS BIGINT), 0)
                     + coalesce(TRY_CAST(xstats ->> '$.ce_mark' AS BIGINT), 0)
                     + coalesce(list_sum(TRY_CAST(xstats -> '$.tins[*].ecn_mark' AS BIGINT[])), 0)
           END) AS bottleneck_marks
    FROM qdisc_stats
    -- the forward bottleneck's queue, and a parking lot's other hops' (p1, p2 ..)
    WHERE list_contains($run_ids::INTEGER[], run_id) AND parent = '1:1'
      AND (router = 'rl' OR regexp_full_match(router, 'p[0-9]+'))
    GROUP BY run_id
), marked AS (
    SELECT r.run_id,
           -- none without ECN-capable traffic (nothing could be marked)
           CASE WHEN sum(d.ect_packets + d.ce_packets) > 0 THEN sum(d.ce_packets) END
               AS ce_packets
    FROM runs r JOIN dir_counters d ON d.capture_id = r.bottleneck_capture
    WHERE list_contains($run_ids::INTEGER[], r.run_id)
    GROUP BY r.run_id
), probe AS (
    SELECT run_id, quantile_cont(rtt_us, 0.5) / 1e3 AS latency_p50_ms,
           quantile_cont(rtt_us, 0.95) / 1e3 AS latency_p95_ms,
           quantile_cont(rtt_us, 0.99) / 1e3 AS latency_p99_ms,
           100 * count(*) FILTER (WHERE lost IS NOT NULL) / count(*) AS latency_loss_pct
    FROM latency
    WHERE list_contains($run_ids::INTEGER[], run_id)
    GROUP BY run_id
), queueing AS (
    SELECT run_id, quantile_cont(delay_us, 0.5) / 1e3 AS queue_delay_p50_ms,
           quantile_cont(delay_us, 0.95) / 1e3 AS queue_delay_p95_ms,
           quantile_cont(delay_us, 0.99) / 1e3 AS queue_delay_p99_ms
    FROM queue_delays
    WHERE list_contains($run_ids::INTEGER[], run_id)
    GROUP BY run_id
), mice AS (
    SELECT run_id, coalesce($fct_bytes::BIGINT, min(bytes)) AS bytes
    FROM short_flows
    WHERE list_contains($run_ids::INTEGER[], run_id)
    GROUP BY run_id
), fct AS (
    SELECT run_id, quantile_cont(s.fct_ms, 0.5) AS fct_p50_ms,
           quantile_cont(s.fct_ms, 0.95) AS fct_p95_ms,
           quantile_cont(s.fct_ms, 0.99) AS fct_p99_ms
    FROM short_flows s JOIN mice USING (run_id, bytes)
    WHERE s.outcome = 'complete'
    GROUP BY run_id
)
SELECT run_id,
       sum(throughput_bps) / 1e6 AS throughput_mbps,
       sum(goodput_bps) / 1e6 AS goodput_mbps,
       8 * sum(unique_bytes) / nullif(any_value(span.span_s), 0) / 1e6 AS system_goodput_mbps,
       sum(iperf_bps) / 1e6 AS iperf3_mbps,
       sum(retransmitted_packets) AS retransmissions,
       avg(rtt_avg_ms) AS rtt_ms,
       any_value(rtt.rtt_p95_ms) AS rtt_p95_ms,
       -- over the forward flows: those that share the (forward) bottleneck
       CASE WHEN count(*) FILTER (WHERE forward) > 1
            THEN sum(goodput_bps) FILTER (WHERE forward) ^ 2
                 / nullif(count(*) FILTER (WHERE forward)
                          * sum(goodput_bps ^ 2) FILTER (WHERE forward), 0) END AS jain,
       CASE WHEN any_value(mode) = 'friendliness'
            THEN avg(goodput_bps) FILTER (WHERE role = 'test')
                 / nullif(max(goodput_bps) FILTER (WHERE role = 'background'), 0) END
           AS friendliness,
       max(iperf_bps) FILTER (WHERE role = 'background') / 1e6 AS background_mbps,
       CASE WHEN bool_or(role = 'background')
            THEN avg(iperf_bps) FILTER (WHERE role = 'test') / 1e6 END AS test_mbps,
       avg(iperf_bps) / 1e6 AS flow_mbps,
       -- a parking lot's: the flows through every hop, and the cross flows
       CASE WHEN bool_or(hop IS NOT NULL)
            THEN avg(iperf_bps) FILTER (WHERE hop IS NULL) / 1e6 END AS through_mbps,
       avg(iperf_bps) FILTER (WHERE hop IS NOT NULL) / 1e6 AS cross_mbps,
       100 * 8 * sum(data_bytes) FILTER (WHERE first_hop)
           / nullif(any_value(span.span_s), 0) / any_value(bw_bps) AS utilization_pct,
       any_value(queue.bottleneck_drops) AS bottleneck_drops,
       any_value(queue.bottleneck_marks) AS bottleneck_marks,
       any_value(marked.ce_packets) AS ce_packets,
       any_value(probe.latency_p50_ms) AS latency_p50_ms,
       any_value(probe.latency_p95_ms) AS latency_p95_ms,
       any_value(probe.latency_p99_ms) AS latency_p99_ms,
       any_value(probe.latency_loss_pct) AS latency_loss_pct,
       any_value(queueing.queue_delay_p50_ms) AS queue_delay_p50_ms,
       any_value(queueing.queue_delay_p95_ms) AS queue_delay_p95_ms,
       any_value(queueing.queue_delay_p99_ms) AS queue_delay_p99_ms,
       any_value(fct.fct_p50_ms) AS fct_p50_ms,
       any_value(fct.fct_p95_ms) AS fct_p95_ms,
       any_value(fct.fct_p99_ms) AS fct_p99_ms
FROM per_flow
JOIN span USING (run_id)
LEFT JOIN rtt USING (run_id)
LEFT JOIN queue USING (run_id)
LEFT JOIN marked USING (run_id)
LEFT JOIN probe USING (run_id)
LEFT JOIN queueing USING (run_id)
LEFT JOIN fct USING (run_id)
GROUP BY run_id
ORDER BY run_id
