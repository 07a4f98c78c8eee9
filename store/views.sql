-- Stable views for users' own SQL (docs/schema.md). The store creates them
-- each time it opens a database, so they follow the tcpvar version in use.

-- Per connection and direction: the statistics of `tcpvar analyze`, named
-- as in its JSON output. Rates use the connection's elapsed time (first to
-- last packet of either direction), as tcptrace does.
CREATE OR REPLACE VIEW conn_stats AS
SELECT d.capture_id, d.conn, d.dir,
       d.packets, d.ack_packets, d.pure_acks,
       d.data_packets, d.data_bytes, d.unique_bytes,
       d.rexmit_packets AS retransmitted_packets,
       d.rexmit_bytes AS retransmitted_bytes,
       d.ooo_packets AS out_of_order_packets,
       d.dupacks AS duplicate_acks, d.triple_dupacks,
       d.sack_packets, d.dsack_packets, d.sack_blocks, d.max_sack_blocks,
       d.zero_win_adv AS zero_window_adverts,
       d.zwnd_probes AS zero_window_probes,
       d.zwnd_probe_bytes AS zero_window_probe_bytes,
       d.pushed AS pushed_packets, d.urgent AS urgent_packets,
       d.syn, d.fin, d.rst,
       d.hw_dups AS hardware_duplicates,
       d.missed_bytes, d.truncated AS truncated_packets,
       nullif(d.mss, -1) AS mss_requested,
       nullif(d.wscale, -1) AS window_scale,
       d.sack_ok = 1 AS sack_permitted,
       d.ts_ok = 1 AS timestamps,
       d.win_min AS window_min, d.win_max AS window_max,
       d.win_sum / nullif(d.win_n, 0) AS window_avg,
       d.seg_min AS segment_min, d.seg_max AS segment_max,
       d.data_bytes / nullif(d.data_packets, 0) AS segment_avg,
       CASE WHEN d.data_packets > 0 THEN d.stream_last - d.stream_first ELSE 0 END
           AS stream_bytes,
       d.rtt_n AS rtt_samples,
       CASE WHEN d.rtt_n > 0 THEN d.rtt_min / 1e3 END AS rtt_min_ms,
       d.rtt_sum / nullif(d.rtt_n, 0) / 1e3 AS rtt_avg_ms,
       CASE WHEN d.rtt_n > 0 THEN d.rtt_max / 1e3 END AS rtt_max_ms,
       CASE WHEN d.rtt_n > 1
            THEN sqrt(greatest(0, (d.rtt_sumsq - d.rtt_sum * d.rtt_sum / d.rtt_n)
                                  / (d.rtt_n - 1))) / 1e3
            WHEN d.rtt_n = 1 THEN 0 END AS rtt_stdev_ms,
       nullif(d.rtt_3whs, -1) / 1e3 AS rtt_3whs_ms,
       d.rto_events, d.fast_retransmits,
       nullif(d.first_ns, 0) AS first_ns, nullif(d.last_ns, 0) AS last_ns,
       nullif(d.data_first_ns, 0) AS data_first_ns,
       nullif(d.data_last_ns, 0) AS data_last_ns,
       (c.last_ns - c.first_ns) / 1e9 AS duration_s,
       8 * d.data_bytes / nullif((c.last_ns - c.first_ns) / 1e9, 0) AS throughput_bps,
       8 * d.unique_bytes / nullif((c.last_ns - c.first_ns) / 1e9, 0) AS goodput_bps
FROM dir_counters d JOIN connections c USING (capture_id, conn);


-- Bytes in flight (the cwnd estimate): the sender's highest sequence sent
-- minus the cumulative ACK, at every ACK from the receiver.
CREATE OR REPLACE VIEW cwnd_estimate AS
SELECT p.capture_id, p.conn, 1 - p.dir AS dir, p.frame, p.ts_ns,
       (p.ts_ns - c.first_ns) / 1e9 AS t_s, p.inflight AS bytes_in_flight
FROM packets p JOIN captures c USING (capture_id)
WHERE p.inflight IS NOT NULL;

-- RTT samples taken under Karn's rule, at the ACK that produced them.
CREATE OR REPLACE VIEW rtt_samples AS
SELECT p.capture_id, p.conn, 1 - p.dir AS dir, p.frame, p.ts_ns,
       (p.ts_ns - c.first_ns) / 1e9 AS t_s, p.rtt_us / 1e3 AS rtt_ms
FROM packets p JOIN captures c USING (capture_id)
WHERE p.rtt_us IS NOT NULL;

-- Inferred retransmission timeouts and fast retransmits, on a time axis.
CREATE OR REPLACE VIEW rto_timeline AS
SELECT e.capture_id, e.conn, e.dir, e.frame, e.ts_ns,
       (e.ts_ns - c.first_ns) / 1e9 AS t_s, e.kind, e.seq, e.len,
       e.silence_ms, e.dupacks, e.backoff
FROM retransmit_events e JOIN captures c USING (capture_id);

-- Packets with readable flags and analysis marks.
CREATE OR REPLACE VIEW packet_marks AS
SELECT p.*, (p.ts_ns - c.first_ns) / 1e9 AS t_s,
       (p.ev & 1) <> 0 AS is_retransmission,
       (p.ev & 2) <> 0 AS is_out_of_order,
       (p.ev & 4) <> 0 AS is_duplicate_ack,
       (p.ev & 8) <> 0 AS is_zero_window,
       (p.ev & 16) <> 0 AS is_window_probe,
       (p.ev & 32) <> 0 AS is_fast_retransmit,
       (p.ev & 64) <> 0 AS is_timeout_retransmit,
       (p.ev & 128) <> 0 AS is_hardware_duplicate,
       (p.ev & 256) <> 0 AS after_missed_data,
       (p.ev & 512) <> 0 AS is_keepalive
FROM packets p JOIN captures c USING (capture_id);

-- NGWA windows (the IPv4 option of docs/schema.md, packets.ngwa_window) on
-- the capture's time axis, next to the windows advertised: the packet's own
-- (`win`) and the latest one advertised by the other direction before it in
-- the capture (`peer_win`: the receiver's, for an option on data packets).
CREATE OR REPLACE VIEW ngwa_windows AS
SELECT p.capture_id, p.conn, p.dir, p.frame, p.ts_ns,
       (p.ts_ns - c.first_ns) / 1e9 AS t_s,
       p.win, p.ngwa_window,
       p.ngwa_window = 4294967295 AS ngwa_unset,
       r.win AS peer_win
FROM packets p
JOIN captures c USING (capture_id)
ASOF LEFT JOIN (SELECT capture_id, conn, dir, frame, win FROM packets
                WHERE flags & 18 <> 0) r
     ON r.capture_id = p.capture_id AND r.conn = p.conn AND r.dir = 1 - p.dir
        AND r.frame < p.frame
WHERE p.ngwa_window IS NOT NULL;

-- tcp_probe events (probe_events) on the run's time axis, with the RTO
-- timeline's marks: entering the Loss state, the backoff growing, and the
-- retransmissions counted since the socket's previous event. Units: ms for
-- the timers. The extended columns are NULL for the stock tracepoint.
-- `flow` is set on the events of a flow's sending socket only, so
-- `WHERE flow = 1` is the sender's trace; its receiver's socket has the
-- flow in `receiver_of`. Time 0 is the first record of the run's sender
-- capture, as in the capture's views, else the run's start.
CREATE OR REPLACE VIEW probe_timeline AS
WITH e AS (
    SELECT p.*,
           lag(p.ca_state) OVER w AS prev_ca_state,
           lag(p.backoff) OVER w AS prev_backoff,
           lag(p.total_retrans) OVER w AS prev_total_retrans,
           lag(p.ts_ns) OVER w AS prev_ns,
           min(p.ts_ns) OVER (PARTITION BY p.run_id) AS first_ns
    FROM probe_events p
    WINDOW w AS (PARTITION BY p.run_id, p.cookie ORDER BY p.ts_ns)
)
SELECT e.run_id,
       CASE WHEN e.side IS DISTINCT FROM 'receiver' THEN e.flow END AS flow,
       e.side,
       CASE WHEN e.side = 'receiver' THEN e.flow END AS receiver_of,
       e.cookie, e.saddr, e.sport, e.daddr, e.dport,
       e.ts_ns, (e.ts_ns - coalesce(c.first_ns, r.started_ns, e.first_ns)) / 1e9 AS t_s,
       e.snd_cwnd, e.ssthresh,
       e.srtt_us / 1e3 AS srtt_ms, e.rttvar_us / 1e3 AS rttvar_ms, e.rto_us / 1e3 AS rto_ms,
       e.rto_var_us / 1e3 AS rto_var_ms,
       e.packets_out, e.retrans_out, e.lost_out, e.sacked_out,
       e.ca_state,
       CASE e.ca_state WHEN 0 THEN 'Open' WHEN 1 THEN 'Disorder' WHEN 2 THEN 'CWR'
                       WHEN 3 THEN 'Recovery' WHEN 4 THEN 'Loss' END AS ca_state_name,
       e.retransmits, e.backoff, e.total_retrans, e.delivered, e.pacing_rate,
       e.ca_state = 4 AND e.prev_ca_state IS DISTINCT FROM 4 AS enters_loss,
       e.backoff > coalesce(e.prev_backoff, 0) AS backoff_grew,
       e.total_retrans - e.prev_total_retrans AS new_retrans,
       (e.ts_ns - e.prev_ns) / 1e6 AS gap_ms
FROM e LEFT JOIN runs r USING (run_id)
LEFT JOIN captures c ON c.capture_id = r.sender_capture;

-- Retransmission timeouts seen by the probe: one row per stay in the Loss
-- state (from the first event in Loss to the first event out of it), with
-- how far the timer backed off and the retransmissions of the episode.
CREATE OR REPLACE VIEW probe_timeouts AS
WITH t AS (
    SELECT *, sum(enters_loss::INTEGER) OVER (PARTITION BY run_id, cookie ORDER BY ts_ns
                                             ROWS UNBOUNDED PRECEDING) AS episode,
           lag(total_retrans) OVER (PARTITION BY run_id, cookie ORDER BY ts_ns)
               AS before_retrans
    FROM probe_timeline
), ep AS (
    SELECT run_id, cookie, episode,
           arg_min(flow, ts_ns) FILTER (WHERE ca_state = 4) AS flow,
           min(ts_ns) FILTER (WHERE ca_state = 4) AS ts_ns,
           arg_min(t_s, ts_ns) FILTER (WHERE ca_state = 4) AS t_s,
           arg_min(gap_ms, ts_ns) FILTER (WHERE ca_state = 4) AS silence_ms,
           min(ts_ns) FILTER (WHERE ca_state <> 4) AS end_ns,
           arg_min(before_retrans, ts_ns) FILTER (WHERE ca_state = 4) AS retrans_before,
           arg_min(total_retrans, ts_ns) FILTER (WHERE ca_state <> 4) AS retrans_after,
           max(total_retrans) FILTER (WHERE ca_state = 4) AS retrans_last,
           max(retransmits) FILTER (WHERE ca_state = 4) AS timeouts,
           max(backoff) FILTER (WHERE ca_state = 4) AS max_backoff,
           arg_min(rto_ms, ts_ns) FILTER (WHERE ca_state = 4) AS rto_ms,
           max(rto_ms) FILTER (WHERE ca_state = 4) AS rto_max_ms,
           arg_min(snd_cwnd, ts_ns) FILTER (WHERE ca_state = 4) AS snd_cwnd,
           arg_min(ssthresh, ts_ns) FILTER (WHERE ca_state = 4) AS ssthresh
    FROM t WHERE episode > 0 GROUP BY run_id, cookie, episode
)
SELECT run_id, flow, cookie, episode, ts_ns, t_s, silence_ms, end_ns,
       (end_ns - ts_ns) / 1e6 AS loss_ms,
       timeouts, max_backoff, rto_ms, rto_max_ms, snd_cwnd, ssthresh,
       coalesce(retrans_after, retrans_last) - retrans_before AS retransmissions
FROM ep WHERE ts_ns IS NOT NULL;

-- Per run and socket: the RTO and cwnd statistics of its probe events.
CREATE OR REPLACE VIEW probe_rto_stats AS
SELECT t.run_id, any_value(t.flow) AS flow, t.cookie,
       any_value(t.saddr) AS saddr, any_value(t.sport) AS sport,
       any_value(t.daddr) AS daddr, any_value(t.dport) AS dport,
       count(*) AS events, min(t.t_s) AS first_s, max(t.t_s) AS last_s,
       min(t.snd_cwnd) AS cwnd_min, avg(t.snd_cwnd) AS cwnd_avg, max(t.snd_cwnd) AS cwnd_max,
       avg(t.srtt_ms) AS srtt_avg_ms, max(t.srtt_ms) AS srtt_max_ms,
       avg(t.rttvar_ms) AS rttvar_avg_ms,
       min(t.rto_ms) AS rto_min_ms, avg(t.rto_ms) AS rto_avg_ms, max(t.rto_ms) AS rto_max_ms,
       count(*) FILTER (WHERE t.enters_loss) AS timeouts,
       max(t.backoff) AS max_backoff,
       max(t.total_retrans) - min(t.total_retrans) AS retransmissions,
       count(*) FILTER (WHERE t.ca_state = 3) AS recovery_events,
       count(*) FILTER (WHERE t.ca_state = 4) AS loss_events
FROM probe_timeline t
GROUP BY t.run_id, t.cookie;

-- Per flow of a run: its data direction in the run's sender capture, and
-- its rates over its data transfer (first to last data packet): all data
-- sent (throughput) and data sent once (goodput), beside iperf3's rate.
CREATE OR REPLACE VIEW flow_rates AS
SELECT r.run_id, f.flow, f.role, f.cc, r.params ->> '$.mode' AS mode,
       (r.params ->> '$.bw_bps')::DOUBLE AS bw_bps, f.iperf_bps,
       c.capture_id, c.conn, s.dir,
       8 * s.data_bytes / nullif((s.data_last_ns - s.data_first_ns) / 1e9, 0) AS throughput_bps,
       8 * s.unique_bytes / nullif((s.data_last_ns - s.data_first_ns) / 1e9, 0) AS goodput_bps,
       s.retransmitted_packets, s.rtt_avg_ms, s.data_bytes, s.unique_bytes, s.data_first_ns,
       s.data_last_ns
FROM runs r
JOIN flows f USING (run_id)
JOIN connections c ON c.capture_id = r.sender_capture AND c.conn = f.conn
JOIN conn_stats s ON s.capture_id = c.capture_id AND s.conn = c.conn
                 AND s.dir = CASE WHEN c.a_port = f.src_port THEN 0 ELSE 1 END;
