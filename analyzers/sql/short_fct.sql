-- Each short flow of run $run_id, found in the sender capture $sender: the
-- connection from its client port to the short-flow server's port $port
-- whose first packet is nearest its start (a port may serve twice in a
-- long run), and its completion time there: from the connection's first
-- SYN to the first ACK from the server that covers its last byte (the
-- relative acknowledgement number SIZE + 1: the SYN takes one).
UPDATE short_flows s SET conn = m.conn, fct_ms = m.fct_ms
FROM (
    WITH chosen AS (
        SELECT sf.id, sf.bytes,
               arg_min(c.conn, abs(c.first_ns - coalesce(sf.start_ns, c.first_ns))) AS conn
        FROM short_flows sf JOIN connections c
          ON c.capture_id = $sender AND c.a_port = sf.sport AND c.b_port = $port
        WHERE sf.run_id = $run_id
        GROUP BY sf.id, sf.bytes
    ),
    syn AS (
        SELECT ch.id, min(p.ts_ns) AS ts_ns
        FROM chosen ch JOIN packets p
          ON p.capture_id = $sender AND p.conn = ch.conn AND p.dir = 0 AND p.flags & 2 <> 0
        GROUP BY ch.id
    ),
    acked AS (
        SELECT ch.id, min(p.ts_ns) AS ts_ns
        FROM chosen ch JOIN packets p
          ON p.capture_id = $sender AND p.conn = ch.conn AND p.dir = 1 AND p.flags & 16 <> 0
         AND p.ack >= ch.bytes + 1
        GROUP BY ch.id
    )
    SELECT ch.id, ch.conn, (acked.ts_ns - syn.ts_ns) / 1e6 AS fct_ms
    FROM chosen ch LEFT JOIN syn USING (id) LEFT JOIN acked USING (id)
) m
WHERE s.run_id = $run_id AND s.id = m.id;
