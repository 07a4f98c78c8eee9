-- The end-of-run summary, one row per flow of a run: iperf3's figures, the
-- sender capture's statistics of the flow's data direction, what tcp_probe
-- saw on the sending socket (local port = the flow's source port), and the
-- NGWA values the bottleneck wrote into the flow's data packets, and its
-- ECN: the data packets that left the bottleneck CE-marked (bottleneck
-- capture), the ACKs that echoed it (ECE) and the data packets whose
-- sender said it had reacted (CWR) in the sender capture; the 50th and
-- 95th percentiles of its data packets' queueing delay (queue_delays).
-- An RTO event is an entry into the Loss state when the probe carries
-- ca_state (extended record), else a timeout the capture analysis inferred.
-- Parameter: $run_id.
WITH probe AS (
    SELECT e.flow,
           count(*) AS events,
           max(e.snd_cwnd) AS cwnd_max,
           avg(e.snd_cwnd) AS cwnd_avg,
           min(e.srtt_us) FILTER (WHERE e.srtt_us > 0) / 1e3 AS srtt_min_ms,
           avg(e.srtt_us) FILTER (WHERE e.srtt_us > 0) / 1e3 AS srtt_avg_ms,
           max(e.rto_us) / 1e3 AS rto_max_ms,
           count(e.ca_state) > 0 AS has_ca_state
    FROM probe_events e JOIN flows f ON f.run_id = e.run_id AND f.flow = e.flow
    WHERE e.run_id = $run_id AND e.sport = f.src_port
    GROUP BY e.flow
),
loss_entries AS (
    SELECT flow, count(*) FILTER (WHERE ca_state = 4 AND prev IS DISTINCT FROM 4) AS n
    FROM (SELECT e.flow, e.ca_state,
                 lag(e.ca_state) OVER (PARTITION BY e.flow ORDER BY e.ts_ns) AS prev
          FROM probe_events e JOIN flows f ON f.run_id = e.run_id AND f.flow = e.flow
          WHERE e.run_id = $run_id AND e.sport = f.src_port AND e.ca_state IS NOT NULL)
    GROUP BY flow
),
ngwa AS (
    SELECT f.flow, count(*) AS packets, min(p.ngwa_window) AS min_bytes,
           median(p.ngwa_window) AS median_bytes
    FROM flows f
    JOIN runs r USING (run_id)
    JOIN connections c ON c.capture_id = r.bottleneck_capture
                      AND ((c.a_port = f.src_port AND c.b_port = f.dst_port)
                           OR (c.a_port = f.dst_port AND c.b_port = f.src_port))
    JOIN packets p ON p.capture_id = c.capture_id AND p.conn = c.conn
                  AND p.dir = CASE WHEN c.a_port = f.src_port THEN 0 ELSE 1 END
    WHERE f.run_id = $run_id AND p.len > 0 AND p.ngwa_window <> 4294967295
    GROUP BY f.flow
),
ecn AS (
    SELECT f.flow, d.ect_packets AS ect, d.cwr_packets AS cwr, back.ece_packets AS ece,
           (SELECT sum(b.ce_packets)
            FROM connections c2
            JOIN dir_counters b ON b.capture_id = c2.capture_id AND b.conn = c2.conn
             AND b.dir = CASE WHEN c2.a_port = f.src_port THEN 0 ELSE 1 END
            WHERE c2.capture_id = r.bottleneck_capture
              AND ((c2.a_port = f.src_port AND c2.b_port = f.dst_port)
                   OR (c2.a_port = f.dst_port AND c2.b_port = f.src_port))) AS ce
    FROM flows f
    JOIN runs r USING (run_id)
    JOIN connections c ON c.capture_id = r.sender_capture AND c.conn = f.conn
    JOIN dir_counters d ON d.capture_id = c.capture_id AND d.conn = c.conn
     AND d.dir = CASE WHEN c.a_port = f.src_port THEN 0 ELSE 1 END
    JOIN dir_counters back ON back.capture_id = c.capture_id AND back.conn = c.conn
     AND back.dir <> d.dir
    WHERE f.run_id = $run_id
),
queueing AS (
    SELECT flow, quantile_cont(delay_us, 0.5) / 1e3 AS p50_ms,
           quantile_cont(delay_us, 0.95) / 1e3 AS p95_ms
    FROM queue_delays
    WHERE run_id = $run_id
    GROUP BY flow
),
pcap AS (
    SELECT f.flow, s.*
    FROM flows f
    JOIN runs r USING (run_id)
    JOIN connections c ON c.capture_id = r.sender_capture AND c.conn = f.conn
    JOIN conn_stats s ON s.capture_id = c.capture_id AND s.conn = c.conn
                     AND s.dir = CASE WHEN c.a_port = f.src_port THEN 0 ELSE 1 END
    WHERE f.run_id = $run_id
)
SELECT f.flow, f.role, f.cc, f.src_addr, f.src_port, f.dst_addr, f.dst_port, f.start_s,
       f.duration_s, f.conn, f.base_rtt_ms, f.ecn, f.direction, f.hop, f.outcome, f.rate_bps,
       f.size_bytes, f.fct_ms,
       ecn.ect AS ect_packets, ecn.ce AS ce_packets, ecn.ece AS ece_packets,
       ecn.cwr AS cwr_packets,
       f.iperf_bps AS throughput_iperf3_bps,
       -- over the flow's data transfer, as iperf3 measures over its test (the
       -- connection may idle before it while iperf3 sets the test up)
       8 * pcap.unique_bytes / nullif((pcap.data_last_ns - pcap.data_first_ns) / 1e9, 0)
           AS throughput_pcap_bps,
       f.iperf_retransmits AS retransmits_iperf3,
       pcap.retransmitted_packets,
       pcap.rtt_avg_ms, pcap.rtt_min_ms, pcap.rtt_max_ms, pcap.rtt_samples,
       pcap.rto_events AS rto_events_pcap,
       probe.events AS probe_events,
       probe.cwnd_max, probe.cwnd_avg, probe.srtt_min_ms, probe.srtt_avg_ms, probe.rto_max_ms,
       CASE WHEN probe.has_ca_state THEN coalesce(loss_entries.n, 0)
            ELSE pcap.rto_events END AS rto_events,
       CASE WHEN probe.has_ca_state THEN 'tcp_probe' ELSE 'pcap' END AS rto_events_source,
       ngwa.packets AS ngwa_packets, ngwa.min_bytes AS ngwa_min_bytes,
       ngwa.median_bytes AS ngwa_median_bytes,
       queueing.p50_ms AS queue_delay_p50_ms, queueing.p95_ms AS queue_delay_p95_ms
FROM flows f
LEFT JOIN pcap USING (flow)
LEFT JOIN probe USING (flow)
LEFT JOIN loss_entries USING (flow)
LEFT JOIN ngwa USING (flow)
LEFT JOIN ecn USING (flow)
LEFT JOIN queueing USING (flow)
WHERE f.run_id = $run_id
ORDER BY f.flow
