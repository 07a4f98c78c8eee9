-- Time-sequence graph of one sender (tcptrace -S, Wireshark's tcptrace
-- graph), decimated to time columns of $col_ns: per column and mark, the
-- lowest and highest sequence number drawn and how many packets made it.
--   data, retransmission: the span the sender's segments covered;
--   ack: the receiver's cumulative ACK; window: its right edge (ACK plus
--   the advertised window); sack: the span its SACK blocks covered;
--   dupack, zero_window: the ACK value of those packets.
-- Sequence numbers are relative, numbered as tshark numbers them: the SYN is
-- 0; without the sender's SYN in the capture the first byte seen is 1 (the
-- store numbers it 0: $shift is 1 then).
-- Parameters: $capture_id, $conn, $dir (the sender's), $origin_ns, $t0_ns,
-- $t1_ns, $col_ns, $shift.
WITH p AS (
    SELECT (ts_ns - $origin_ns) // $col_ns AS col, dir, seq, len, ack, win, flags, ev,
           sack_l, sack_r
    FROM packets
    WHERE capture_id = $capture_id AND conn = $conn AND ts_ns BETWEEN $t0_ns AND $t1_ns
), sender AS (
    SELECT * FROM p WHERE dir = $dir AND len > 0
), receiver AS (
    SELECT * FROM p WHERE dir = 1 - $dir AND flags & 16 <> 0
), marks AS (
    SELECT 'data' AS mark, col, min(seq) AS lo, max(seq + len) AS hi, count(*) AS n
    FROM sender WHERE ev & 1 = 0 GROUP BY col
    UNION ALL
    SELECT 'retransmission', col, min(seq), max(seq + len), count(*)
    FROM sender WHERE ev & 1 <> 0 GROUP BY col
    UNION ALL
    SELECT 'ack', col, min(ack), max(ack), count(*) FROM receiver GROUP BY col
    UNION ALL
    SELECT 'window', col, min(ack + win), max(ack + win), count(*) FROM receiver GROUP BY col
    UNION ALL
    SELECT 'sack', col, min(l), max(r), count(*)
    FROM (SELECT col, unnest(sack_l) AS l, unnest(sack_r) AS r FROM receiver
          WHERE len(sack_l) > 0)
    GROUP BY col
    UNION ALL
    SELECT 'dupack', col, min(ack), max(ack), count(*) FROM receiver WHERE ev & 4 <> 0
    GROUP BY col
    UNION ALL
    SELECT 'zero_window', col, min(ack), max(ack), count(*) FROM receiver WHERE ev & 8 <> 0
    GROUP BY col
)
SELECT mark, col * $col_ns / 1e9 AS t_s, lo + $shift, hi + $shift, n FROM marks
ORDER BY mark, col
