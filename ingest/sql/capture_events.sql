-- Capture $1's retransmission episodes from the scanner's table _tv_events.
INSERT INTO retransmit_events
SELECT $1, conn, dir, frame, ts_ns,
       CASE kind WHEN 1 THEN 'timeout' ELSE 'fast' END,
       seq, len, silence_ns / 1e6, dupacks, backoff
FROM _tv_events
