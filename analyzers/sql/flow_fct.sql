-- The completion time of run $run_id's finite flows (--size) in the sender
-- capture: from their connection's first SYN to the first ACK from the
-- receiver that covers their last byte (relative acknowledgement number
-- size + 1), as a short flow's (short_fct.sql).
UPDATE flows f SET fct_ms = m.fct_ms
FROM (
    SELECT f.flow,
           (min(p.ts_ns) FILTER (WHERE p.dir = 1 AND p.flags & 16 <> 0
                                  AND p.ack >= f.size_bytes + 1)
            - min(p.ts_ns) FILTER (WHERE p.dir = 0 AND p.flags & 2 <> 0)) / 1e6 AS fct_ms
    FROM flows f JOIN runs r USING (run_id)
    JOIN packets p ON p.capture_id = r.sender_capture AND p.conn = f.conn
    WHERE f.run_id = $run_id AND f.size_bytes IS NOT NULL
    GROUP BY f.flow
) m
WHERE f.run_id = $run_id AND f.flow = m.flow;
