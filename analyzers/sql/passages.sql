-- Each packet that left a queue, matched to its own arrival: the latest
-- arrival before it of the same packet (direction, 4-tuple, raw sequence
-- and acknowledgement numbers, length, flags and TCP timestamp), so a
-- packet dropped at the tail, or sent twice, is never taken for another.
-- $sender: the capture of what entered the queue's router; $bottleneck:
-- what left the queue; $through: the source ports of the packets through
-- the queue (NULL: every departure went through it). Into the temporary
-- table tv_passages, read by fidelity_service.sql and queue_delays.sql;
-- arrived_ns is NULL for a departure whose arrival was not captured.
CREATE OR REPLACE TEMP TABLE tv_passages AS
WITH side AS (
    SELECT p.capture_id, p.frame, p.ts_ns, p.wire_len, p.len, p.flags,
           if(p.dir = 0, c.a_addr, c.b_addr) AS src, if(p.dir = 0, c.a_port, c.b_port) AS sport,
           if(p.dir = 0, c.b_addr, c.a_addr) AS dst, if(p.dir = 0, c.b_port, c.a_port) AS dport,
           (p.seq + if(p.dir = 0, c.a_isn, c.b_isn)) % 4294967296 AS raw_seq,
           if(p.flags & 16 = 0, 0,
              (p.ack + if(p.dir = 0, c.b_isn, c.a_isn)) % 4294967296) AS raw_ack,
           coalesce(p.tsval, 0) AS tsval
    FROM packets p JOIN connections c ON c.capture_id = p.capture_id AND c.conn = p.conn
    WHERE p.capture_id IN ($sender, $bottleneck)
),
departed AS (SELECT * FROM side WHERE capture_id = $bottleneck
             AND ($through IS NULL OR list_contains($through::INTEGER[], sport))),
arrived AS (SELECT * FROM side WHERE capture_id = $sender)
SELECT d.frame, any_value(d.ts_ns) AS ts_ns, any_value(d.wire_len) AS wire_len,
       any_value(d.sport) AS sport, any_value(d.dport) AS dport, any_value(d.len) AS len,
       max(a.ts_ns) AS arrived_ns
FROM departed d LEFT JOIN arrived a
  ON d.src = a.src AND d.sport = a.sport AND d.dst = a.dst AND d.dport = a.dport
 AND d.raw_seq = a.raw_seq AND d.raw_ack = a.raw_ack AND d.len = a.len
 AND d.flags = a.flags AND d.tsval = a.tsval AND a.ts_ns <= d.ts_ns
GROUP BY d.frame
