-- The table of connections `tcpvar analyze` prints as plain text, laid out
-- by DuckDB (a million connections in seconds, where Python took half a
-- minute): a line per connection and direction of capture $capture_id, for
-- the connections $first_conn..$last_conn (a batch), in the columns of
-- report/tables.py's CONN_COLUMNS. The connection's number on its first
-- line, the endpoints as connections.endpoint() writes them and aligned
-- left, counts as they are, sizes and rates as report.tables.si() writes
-- them (the macro tv_si, sql/text_macros.sql), the RTT to 0.1 ms, "-" for
-- a missing value. Each column is as wide as its widest cell and at least
-- $widths[i] (its heading's, or an earlier batch's width): every line
-- carries the widths (w1..w14), and ends without spaces.
WITH stats AS (
    SELECT s.*,
           CASE WHEN c.ip_version = 6 THEN '[' || c.a_addr || ']:' || c.a_port
                ELSE c.a_addr || ':' || c.a_port END AS a,
           CASE WHEN c.ip_version = 6 THEN '[' || c.b_addr || ']:' || c.b_port
                ELSE c.b_addr || ':' || c.b_port END AS b
    FROM connections c
    JOIN conn_stats s USING (capture_id, conn)
    WHERE c.capture_id = $capture_id AND c.conn BETWEEN $first_conn AND $last_conn
      AND s.conn BETWEEN $first_conn AND $last_conn
), cells AS (
    SELECT conn, dir,
           CASE WHEN dir = 0 THEN conn::VARCHAR ELSE '' END AS c1,
           CASE WHEN dir = 0 THEN a || ' → ' || b ELSE b || ' → ' || a END AS c2,
           coalesce(packets::VARCHAR, '-') AS c3,
           coalesce(data_packets::VARCHAR, '-') AS c4,
           tv_si(data_bytes, 'B') AS c5,
           tv_si(unique_bytes, 'B') AS c6,
           coalesce(retransmitted_packets::VARCHAR, '-') AS c7,
           tv_si(retransmitted_bytes, 'B') AS c8,
           coalesce(out_of_order_packets::VARCHAR, '-') AS c9,
           coalesce(duplicate_acks::VARCHAR, '-') AS c10,
           coalesce(rto_events::VARCHAR, '-') || '/'
               || coalesce(fast_retransmits::VARCHAR, '-') AS c11,
           coalesce(printf('%.1f', rtt_avg_ms), '-') || ' ('
               || coalesce(rtt_samples::VARCHAR, '-') || ')' AS c12,
           tv_si(throughput_bps, 'bit/s') AS c13,
           tv_si(goodput_bps, 'bit/s') AS c14
    FROM stats
), widths AS (
    -- each a column: a list per line cost more than the rest of the query
    SELECT *,
           greatest($widths[1], max(length(c1)) OVER ())::INTEGER AS w1,
           greatest($widths[2], max(length(c2)) OVER ())::INTEGER AS w2,
           greatest($widths[3], max(length(c3)) OVER ())::INTEGER AS w3,
           greatest($widths[4], max(length(c4)) OVER ())::INTEGER AS w4,
           greatest($widths[5], max(length(c5)) OVER ())::INTEGER AS w5,
           greatest($widths[6], max(length(c6)) OVER ())::INTEGER AS w6,
           greatest($widths[7], max(length(c7)) OVER ())::INTEGER AS w7,
           greatest($widths[8], max(length(c8)) OVER ())::INTEGER AS w8,
           greatest($widths[9], max(length(c9)) OVER ())::INTEGER AS w9,
           greatest($widths[10], max(length(c10)) OVER ())::INTEGER AS w10,
           greatest($widths[11], max(length(c11)) OVER ())::INTEGER AS w11,
           greatest($widths[12], max(length(c12)) OVER ())::INTEGER AS w12,
           greatest($widths[13], max(length(c13)) OVER ())::INTEGER AS w13,
           greatest($widths[14], max(length(c14)) OVER ())::INTEGER AS w14
    FROM cells
)
SELECT rtrim(lpad(c1, w1, ' ') || '  ' || rpad(c2, w2, ' ') || '  '
             || lpad(c3, w3, ' ') || '  ' || lpad(c4, w4, ' ') || '  '
             || lpad(c5, w5, ' ') || '  ' || lpad(c6, w6, ' ') || '  '
             || lpad(c7, w7, ' ') || '  ' || lpad(c8, w8, ' ') || '  '
             || lpad(c9, w9, ' ') || '  ' || lpad(c10, w10, ' ') || '  '
             || lpad(c11, w11, ' ') || '  ' || lpad(c12, w12, ' ') || '  '
             || lpad(c13, w13, ' ') || '  ' || lpad(c14, w14, ' ')) AS line,
       w1, w2, w3, w4, w5, w6, w7, w8, w9, w10, w11, w12, w13, w14
FROM widths
ORDER BY conn, dir
