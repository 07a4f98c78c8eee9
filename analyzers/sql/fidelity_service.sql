-- The bottleneck's service rate while its queue was backlogged, per step of
-- the run's bandwidth schedule (the fidelity check, docs/run.md).
--
-- Both captures are taken in the bottleneck router rl: the sender capture
-- has every packet arriving at rl, the bottleneck capture every packet
-- leaving its queue. Each departure is matched to its own arrival (the
-- latest arrival before it of the same packet: direction, 4-tuple, raw
-- sequence and acknowledgement numbers, length, flags and TCP timestamp),
-- so a packet dropped at the tail, or sent twice, is never taken for
-- another. The queue was non-empty for the whole gap between two
-- consecutive departures when the later packet had already arrived by the
-- earlier departure: that gap was spent paying for a packet, and
-- Σ bytes / Σ gaps over such pairs is the rate the shaper delivered. TBF
-- waits for a packet's tokens before sending it, so a gap pays for the
-- later packet; HTB sends while its tokens last and charges afterwards, so
-- a gap pays for the earlier one ($charged_after). With packets of one
-- size the two agree; an ACK between data packets tells them apart. Bytes
-- are frame lengths (the Ethernet header counts, as the shaper counts it).
-- A pair is counted in the step its departure falls in, seconds after the
-- flows' start ($started_ns); pairs within $guard_before s before to
-- $guard_after s after a rate change are left out (the change is applied
-- up to a loop's sleep late, and the queue then drains at the new rate).
-- The same holds for a parking lot's hop k (what entered its router,
-- hop<k>-in.pcap, and what left its queue, hop<k>.pcap). With reverse
-- flows, the bottleneck capture holds both bottlenecks' departures and the
-- sender capture the reverse flows' arrivals at rr: $through lists the
-- source ports of the packets through the queue measured (NULL: every
-- departure went through it). The forward flows' ACKs entering rr are not
-- captured, so a gap ending with one of them leaves the reverse queue's sum.
-- Parameters: $sender, $bottleneck (capture ids), $through, $charged_after,
-- $started_ns, $starts
-- (DOUBLE[]: each step's start, seconds, ascending, the first 0),
-- $guard_before, $guard_after.
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
arrived AS (SELECT * FROM side WHERE capture_id = $sender),
matched AS (
    SELECT d.frame, any_value(d.ts_ns) AS ts_ns, any_value(d.wire_len) AS wire_len,
           max(a.ts_ns) AS arrived_ns
    FROM departed d LEFT JOIN arrived a
      ON d.src = a.src AND d.sport = a.sport AND d.dst = a.dst AND d.dport = a.dport
     AND d.raw_seq = a.raw_seq AND d.raw_ack = a.raw_ack AND d.len = a.len
     AND d.flags = a.flags AND d.tsval = a.tsval AND a.ts_ns <= d.ts_ns
    GROUP BY d.frame
),
pairs AS (
    SELECT ts_ns, arrived_ns, (ts_ns - $started_ns) / 1e9 AS t_s,
           if($charged_after, lag(wire_len) OVER (ORDER BY ts_ns, frame), wire_len) AS wire_len,
           lag(ts_ns) OVER (ORDER BY ts_ns, frame) AS prev_ns
    FROM matched
),
backlogged AS (
    SELECT len(list_filter($starts::DOUBLE[], lambda s: s <= t_s)) AS step, wire_len,
           ts_ns - prev_ns AS gap_ns, t_s
    FROM pairs
    WHERE arrived_ns < prev_ns
      AND NOT list_bool_or(list_transform($starts::DOUBLE[],
              lambda s: s > 0 AND t_s >= s - $guard_before AND t_s < s + $guard_after))
)
SELECT greatest(step, 1) AS step, count(*) AS departures, sum(wire_len) AS bytes,
       sum(gap_ns) AS gap_ns
FROM backlogged
GROUP BY ALL
ORDER BY step
