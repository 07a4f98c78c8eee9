-- connections.sql with only what analyze's one-line summary of each
-- direction shows: the endpoints and analyzers/connections.py's
-- SUMMARY_STATS, in the same order and computed as the conn_stats view
-- computes them (store/views.sql), from its tables: DuckDB binds every one
-- of the view's sixty columns each time a query names it, which costs a
-- small capture's table more than reading it.
-- Parameters: $capture_id, $first_conn..$last_conn.
SELECT c.conn, d.dir, c.ip_version, c.a_addr, c.a_port, c.b_addr, c.b_port,
       d.packets, d.data_packets, d.data_bytes, d.unique_bytes,
       d.rexmit_packets AS retransmitted_packets,
       d.rexmit_bytes AS retransmitted_bytes,
       d.ooo_packets AS out_of_order_packets,
       d.dupacks AS duplicate_acks,
       d.rtt_n AS rtt_samples,
       d.rtt_sum / nullif(d.rtt_n, 0) / 1e3 AS rtt_avg_ms,
       d.rto_events, d.fast_retransmits,
       8 * d.data_bytes / nullif((c.last_ns - c.first_ns) / 1e9, 0) AS throughput_bps,
       8 * d.unique_bytes / nullif((c.last_ns - c.first_ns) / 1e9, 0) AS goodput_bps
FROM connections c
JOIN dir_counters d USING (capture_id, conn)
WHERE c.capture_id = $capture_id AND c.conn BETWEEN $first_conn AND $last_conn
    AND d.conn BETWEEN $first_conn AND $last_conn
ORDER BY c.conn, d.dir
