-- Connections of one capture with both directions' statistics, one row per
-- connection and direction, the direction's statistics last (from `packets`
-- on). Parameters: $capture_id, and the range of connections
-- $first_conn..$last_conn (a batch: DuckDB sorts only the range).
SELECT c.conn, s.dir, c.ip_version, c.a_addr, c.a_port, c.b_addr, c.b_port,
       (c.first_ns - cap.first_ns) / 1e9 AS start_s,
       (c.last_ns - c.first_ns) / 1e9 AS connection_duration_s,
       c.packets AS total_packets, c.handshake, c.closed, c.reset,
       s.* EXCLUDE (capture_id, conn, dir, duration_s)
FROM connections c
JOIN captures cap USING (capture_id)
JOIN conn_stats s USING (capture_id, conn)
WHERE c.capture_id = $capture_id AND c.conn BETWEEN $first_conn AND $last_conn
    AND s.conn BETWEEN $first_conn AND $last_conn
ORDER BY c.conn, s.dir
