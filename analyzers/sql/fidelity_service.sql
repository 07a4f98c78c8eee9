-- The bottleneck's service rate while its queue was backlogged, per step of
-- the run's bandwidth schedule (the fidelity check, docs/run.md).
--
-- Both captures are taken in the bottleneck router rl: the sender capture
-- has every packet arriving at rl, the bottleneck capture every packet
-- leaving its queue. Each departure is matched to its own arrival
-- (passages.sql, run first: tv_passages). The queue was non-empty for
-- the whole gap between two consecutive departures when the later packet had already arrived by the
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
-- sender capture the reverse flows' arrivals at rr: passages.sql's $through lists the
-- source ports of the packets through the queue measured (NULL: every
-- departure went through it). The forward flows' ACKs entering rr are not
-- captured, so a gap ending with one of them leaves the reverse queue's sum.
-- Parameters: $charged_after, $started_ns, $starts
-- (DOUBLE[]: each step's start, seconds, ascending, the first 0),
-- $guard_before, $guard_after.
WITH pairs AS (
    SELECT ts_ns, arrived_ns, (ts_ns - $started_ns) / 1e9 AS t_s,
           if($charged_after, lag(wire_len) OVER (ORDER BY ts_ns, frame), wire_len) AS wire_len,
           lag(ts_ns) OVER (ORDER BY ts_ns, frame) AS prev_ns
    FROM tv_passages
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
