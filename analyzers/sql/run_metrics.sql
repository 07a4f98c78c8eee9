-- One row per run of $run_ids: the metrics `tcpvar compare` aggregates
-- across runs. Per flow as in the run summary (the sender capture's data
-- direction, rates over the flow's data transfer), then per run: the sum of
-- the flows' throughput (all data sent), goodput (data sent once) and
-- iperf3's rate (bytes its receiver counted), their retransmitted packets, the mean of their average
-- RTTs, Jain's index over their goodputs (two flows or more) and, in
-- friendliness runs, the test flows' mean goodput over the Reno background
-- flow's.
-- Parameter: $run_ids (INTEGER[]).
WITH per_flow AS (
    SELECT r.run_id, r.params ->> '$.mode' AS mode, f.flow, f.role, f.iperf_bps,
           8 * s.data_bytes / nullif((s.data_last_ns - s.data_first_ns) / 1e9, 0)
               AS throughput_bps,
           8 * s.unique_bytes / nullif((s.data_last_ns - s.data_first_ns) / 1e9, 0)
               AS goodput_bps,
           s.retransmitted_packets, s.rtt_avg_ms
    FROM runs r
    JOIN flows f USING (run_id)
    JOIN connections c ON c.capture_id = r.sender_capture AND c.conn = f.conn
    JOIN conn_stats s ON s.capture_id = c.capture_id AND s.conn = c.conn
                     AND s.dir = CASE WHEN c.a_port = f.src_port THEN 0 ELSE 1 END
    WHERE list_contains($run_ids::INTEGER[], r.run_id)
)
SELECT run_id,
       sum(throughput_bps) / 1e6 AS throughput_mbps,
       sum(goodput_bps) / 1e6 AS goodput_mbps,
       sum(iperf_bps) / 1e6 AS iperf3_mbps,
       sum(retransmitted_packets) AS retransmissions,
       avg(rtt_avg_ms) AS rtt_ms,
       CASE WHEN count(*) > 1
            THEN sum(goodput_bps) ^ 2 / nullif(count(*) * sum(goodput_bps ^ 2), 0) END AS jain,
       CASE WHEN any_value(mode) = 'friendliness'
            THEN avg(goodput_bps) FILTER (WHERE role = 'test')
                 / nullif(max(goodput_bps) FILTER (WHERE role = 'background'), 0) END
           AS friendliness
FROM per_flow
GROUP BY run_id
ORDER BY run_id
