-- The bottleneck's queueing delay and occupancy, packet by packet, from
-- tv_passages (passages.sql: each packet that left the queue, matched to
-- its arrival at the router). Per data packet of run $run_id's flows: when
-- it arrived and left, the time between (its sojourn in the queue and the
-- router), and the queue it left behind: the packets (and their bytes,
-- Ethernet header counted) that had arrived by then and left after it.
-- Packets the queue dropped never leave it and count in neither.
-- $flows: the flows' source ports (INTEGER[]), in the order of $numbers,
-- their flow numbers.
INSERT INTO queue_delays
WITH known AS (
    SELECT * FROM tv_passages WHERE arrived_ns IS NOT NULL
),
events AS (             -- +1 at each arrival, -1 at each departure
    SELECT arrived_ns AS ts_ns, 0 AS kind, frame, 1 AS n, wire_len::BIGINT AS bytes FROM known
    UNION ALL
    SELECT ts_ns, 1, frame, -1, -wire_len::BIGINT FROM known
),
running AS (            -- an arrival before a departure of the same instant
    SELECT kind, frame, sum(n) OVER w AS backlog_packets, sum(bytes) OVER w AS backlog_bytes
    FROM events
    WINDOW w AS (ORDER BY ts_ns, kind, frame ROWS UNBOUNDED PRECEDING)
)
SELECT $run_id, $numbers[list_position($flows::INTEGER[], k.sport)], k.arrived_ns, k.ts_ns,
       (k.ts_ns - k.arrived_ns) / 1e3, r.backlog_packets, r.backlog_bytes
FROM known k JOIN running r ON r.kind = 1 AND r.frame = k.frame
WHERE k.len > 0 AND list_contains($flows::INTEGER[], k.sport)
