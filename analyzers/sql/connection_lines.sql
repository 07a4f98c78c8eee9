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
-- carries the widths, and ends without spaces.
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
    SELECT *, [greatest($widths[1], max(length(c1)) OVER ()),
               greatest($widths[2], max(length(c2)) OVER ()),
               greatest($widths[3], max(length(c3)) OVER ()),
               greatest($widths[4], max(length(c4)) OVER ()),
               greatest($widths[5], max(length(c5)) OVER ()),
               greatest($widths[6], max(length(c6)) OVER ()),
               greatest($widths[7], max(length(c7)) OVER ()),
               greatest($widths[8], max(length(c8)) OVER ()),
               greatest($widths[9], max(length(c9)) OVER ()),
               greatest($widths[10], max(length(c10)) OVER ()),
               greatest($widths[11], max(length(c11)) OVER ()),
               greatest($widths[12], max(length(c12)) OVER ()),
               greatest($widths[13], max(length(c13)) OVER ()),
               greatest($widths[14], max(length(c14)) OVER ())]::INTEGER[] AS w
    FROM cells
)
SELECT rtrim(lpad(c1, w[1], ' ') || '  ' || rpad(c2, w[2], ' ') || '  '
             || lpad(c3, w[3], ' ') || '  ' || lpad(c4, w[4], ' ') || '  '
             || lpad(c5, w[5], ' ') || '  ' || lpad(c6, w[6], ' ') || '  '
             || lpad(c7, w[7], ' ') || '  ' || lpad(c8, w[8], ' ') || '  '
             || lpad(c9, w[9], ' ') || '  ' || lpad(c10, w[10], ' ') || '  '
             || lpad(c11, w[11], ' ') || '  ' || lpad(c12, w[12], ' ') || '  '
             || lpad(c13, w[13], ' ') || '  ' || lpad(c14, w[14], ' ')) AS line,
       w AS widths
FROM widths
ORDER BY conn, dir
