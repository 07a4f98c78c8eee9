-- tcpvar store schema (documented in docs/schema.md). Statements are
-- idempotent: the store applies this file every time it opens a database.

CREATE TABLE IF NOT EXISTS meta (
    key   VARCHAR PRIMARY KEY,
    value VARCHAR
);

CREATE SEQUENCE IF NOT EXISTS capture_ids START 1;

-- One row per analysed capture file.
CREATE TABLE IF NOT EXISTS captures (
    capture_id     INTEGER PRIMARY KEY,
    path           VARCHAR NOT NULL,     -- absolute path when analysed
    size_bytes     BIGINT,
    mtime_ns       BIGINT,
    fingerprint    VARCHAR,              -- size + hash of head and tail
    link_type      INTEGER,
    link_name      VARCHAR,
    frames         BIGINT,               -- records read
    tcp_packets    BIGINT,               -- of which TCP segments
    non_tcp        BIGINT,
    ip_fragments   BIGINT,               -- non-first fragments (no TCP header)
    too_short      BIGINT,               -- cut before the TCP header
    malformed      BIGINT,
    first_ns       BIGINT,               -- first and last record, ns since epoch
    last_ns        BIGINT,
    truncated      BOOLEAN,              -- the file ends inside a record
    warning        VARCHAR,
    with_packets   BOOLEAN,              -- packets table filled for it
    rto_min_ms     DOUBLE,               -- analysis options it was read with
    hwdup_us       DOUBLE,
    interval_ms    DOUBLE,               -- bin width of its throughput series
    analyzed_at    TIMESTAMP,
    tcpvar_version VARCHAR,
    complete       BOOLEAN               -- false while it is being loaded
);

-- One row per TCP segment: the view `packets` over Parquet segment files
-- beside the database (store/segments.py; columns in docs/schema.md).

-- One row per TCP connection; a is the host that sent the first packet.
CREATE TABLE IF NOT EXISTS connections (
    capture_id  INTEGER,
    conn        UINTEGER,
    ip_version  UTINYINT,
    a_addr      VARCHAR,
    a_port      USMALLINT,
    b_addr      VARCHAR,
    b_port      USMALLINT,
    first_ns    BIGINT,
    last_ns     BIGINT,
    packets     BIGINT,
    a_isn       UINTEGER,               -- raw sequence number that seq 0 stands for
    b_isn       UINTEGER,
    handshake   BOOLEAN,                -- SYN seen from both sides
    closed      BOOLEAN,                -- FIN seen from both sides, or a RST
    reset       BOOLEAN,
    PRIMARY KEY (capture_id, conn)
);

-- Raw counters of the one-pass analysis, per connection and direction
-- (dir 0 = a->b, 1 = b->a). Users read the conn_stats view built on them.
CREATE TABLE IF NOT EXISTS dir_counters (
    capture_id INTEGER, conn UINTEGER, dir UTINYINT,
    packets BIGINT, ack_packets BIGINT, pure_acks BIGINT,
    data_packets BIGINT, data_bytes BIGINT, unique_bytes BIGINT,
    rexmit_packets BIGINT, rexmit_bytes BIGINT, ooo_packets BIGINT,
    dupacks BIGINT, triple_dupacks BIGINT,
    sack_packets BIGINT, dsack_packets BIGINT, sack_blocks BIGINT, max_sack_blocks BIGINT,
    zero_win_adv BIGINT, zwnd_probes BIGINT, zwnd_probe_bytes BIGINT,
    pushed BIGINT, urgent BIGINT, syn BIGINT, fin BIGINT, rst BIGINT, hw_dups BIGINT,
    missed_bytes BIGINT, truncated BIGINT,
    win_min BIGINT, win_max BIGINT, win_n BIGINT, win_sum DOUBLE,
    seg_min BIGINT, seg_max BIGINT,
    rtt_n BIGINT, rtt_min DOUBLE, rtt_max DOUBLE, rtt_sum DOUBLE, rtt_sumsq DOUBLE,
    rtt_3whs DOUBLE,                     -- microseconds; -1 when not measured
    rto_events BIGINT, fast_retransmits BIGINT,
    first_ns BIGINT, last_ns BIGINT, data_first_ns BIGINT, data_last_ns BIGINT,
    stream_first BIGINT, stream_last BIGINT,
    mss BIGINT, wscale BIGINT, sack_ok BIGINT, ts_ok BIGINT,   -- -1: not offered
    PRIMARY KEY (capture_id, conn, dir)
);

-- Retransmission episodes inferred from the capture: a timeout (the
-- sender was silent, then resent the first unacknowledged segment) or a fast
-- retransmit (after duplicate ACKs or SACK), with the evidence.
CREATE TABLE IF NOT EXISTS retransmit_events (
    capture_id INTEGER,
    conn       UINTEGER,
    dir        UTINYINT,                -- the sender's direction
    frame      UINTEGER,
    ts_ns      BIGINT,
    kind       VARCHAR,                 -- 'timeout' or 'fast'
    seq        BIGINT,
    len        UINTEGER,
    silence_ms DOUBLE,                  -- since it last heard from the peer or timed out: the timer
    dupacks    UINTEGER,                -- duplicate ACKs seen for this sequence
    backoff    UINTEGER                 -- consecutive timeouts without progress
);

-- Throughput per connection, direction and interval of the capture's time
-- base (bins start at the capture's first record).
CREATE TABLE IF NOT EXISTS throughput (
    capture_id   INTEGER,
    conn         UINTEGER,
    dir          UTINYINT,
    bin          INTEGER,
    t_s          DOUBLE,                -- bin start, seconds since capture start
    packets      BIGINT,
    bytes        BIGINT,
    unique_bytes BIGINT,
    bps          DOUBLE,
    goodput_bps  DOUBLE
);

-- ---------------------------------------------------------------------------
-- Runs: `tcpvar run` (kind 'run') and `tcpvar probe` sessions (kind 'probe').

CREATE SEQUENCE IF NOT EXISTS run_ids START 1;

-- One row per run (one repetition of `tcpvar run`, or one `tcpvar probe` session).
CREATE TABLE IF NOT EXISTS runs (
    run_id         INTEGER PRIMARY KEY,
    kind           VARCHAR,             -- 'run' or 'probe'
    name           VARCHAR,             -- the run folder's name
    dir            VARCHAR,             -- absolute path of the run folder
    backend        VARCHAR,             -- 'netns' or 'vm' (NULL for probe sessions)
    kernel         VARCHAR,             -- kernel release the flows ran on
    params         JSON,                -- the options the run was started with
    seed           BIGINT,
    repetition     INTEGER,             -- 1..--repeat
    started_ns     BIGINT,
    ended_ns       BIGINT,
    status         VARCHAR,             -- 'running', 'complete', 'interrupted', 'failed'
    error          VARCHAR,             -- why it failed or was interrupted
    probe_source   VARCHAR,             -- 'tracefs', 'tracefs-ext' or 'bpf'
    probe_events   BIGINT,              -- events recorded
    probe_lost     BIGINT,              -- events the kernel or ring buffer dropped
    sender_capture INTEGER,             -- capture_id of the sender-side pcap
    bottleneck_capture INTEGER,         -- capture_id of the bottleneck pcap
    tcpvar_version VARCHAR,
    study          VARCHAR,             -- the study (tcpvar sweep) the run belongs to
    cell           VARCHAR              -- its cell of the study: a digest of its params
);

-- One row per iperf3 flow of a run.
CREATE TABLE IF NOT EXISTS flows (
    run_id        INTEGER,
    flow          INTEGER,              -- 1..N in order of start
    role          VARCHAR,              -- 'test' or 'background'
    cc            VARCHAR,              -- the sender's variant
    src_addr      VARCHAR,              -- sender (iperf3 client)
    src_port      USMALLINT,
    dst_addr      VARCHAR,              -- receiver (iperf3 server)
    dst_port      USMALLINT,
    start_s       DOUBLE,               -- planned start, seconds after the run's start
    duration_s    DOUBLE,
    conn          UINTEGER,             -- its connection in the sender capture
    bytes_sent    BIGINT,               -- iperf3 end summary (sender side)
    bytes_received BIGINT,              -- iperf3 end summary (receiver side)
    iperf_bps     DOUBLE,               -- receiver-side throughput by iperf3
    iperf_retransmits BIGINT,           -- sender's retransmissions by iperf3 (TCP_INFO)
    PRIMARY KEY (run_id, flow)
);

-- The queues of a run's routers at its end (`tc -s -j qdisc`): the
-- bottleneck's rate limiter and queue on rl, the netem delay on rd.
CREATE TABLE IF NOT EXISTS qdisc_stats (
    run_id      INTEGER,
    router      VARCHAR,                -- 'rl' (bottleneck), 'rd' (delay), 'rr' (reverse
                                        -- bottleneck), p<k> (a parking lot's hops)
    dev         VARCHAR,
    kind        VARCHAR,                -- htb, tbf, pfifo, bfifo, ngwa, netem
    handle      VARCHAR,
    parent      VARCHAR,                -- NULL for a root qdisc
    bytes       BIGINT,                 -- sent
    packets     BIGINT,
    drops       BIGINT,
    overlimits  BIGINT,
    requeues    BIGINT,
    backlog     BIGINT,                 -- bytes still queued
    qlen        BIGINT,
    options     JSON,                   -- as tc prints them (limit, rate, fd, ...)
    xstats      JSON                    -- the qdisc's own counters (ngwa: lowered, ...)
);
-- The latency probe beside a run's flows (--latency): one row per request
-- irtt or ping sent from the first flow's sender to its receiver, with
-- the delays they measured.
CREATE TABLE IF NOT EXISTS latency (
    run_id    INTEGER,
    tool      VARCHAR,                  -- 'irtt' or 'ping'
    seq       INTEGER,                  -- the request's sequence number
    sent_ns   BIGINT,                   -- when it was sent (wall clock, ns since the epoch)
    rtt_us    DOUBLE,                   -- its round trip (irtt: less the server's own time)
    up_us     DOUBLE,                   -- irtt: one way to the receiver (one host, one clock)
    down_us   DOUBLE,                   -- irtt: one way back
    lost      VARCHAR                   -- NULL: answered; 'up', 'down' (irtt), 'unknown'
);

-- The bottleneck's queueing delay, per data packet of a run's forward
-- flows seen entering the bottleneck router (sender capture) and leaving
-- its queue (bottleneck capture): analyzers/sql/queue_delays.sql.
CREATE TABLE IF NOT EXISTS queue_delays (
    run_id          INTEGER,
    flow            INTEGER,
    arrived_ns      BIGINT,             -- entering the router (sender capture)
    departed_ns     BIGINT,             -- leaving the queue (bottleneck capture)
    delay_us        DOUBLE,             -- departed - arrived
    backlog_packets INTEGER,            -- the queue it left behind
    backlog_bytes   BIGINT
);

-- The bottleneck queue's backlog sampled by the runner while the flows
-- ran (`tc -s` every 100 ms, backlog.jsonl): a series of the queue
-- independent of the captures' (queue_delays).
CREATE TABLE IF NOT EXISTS backlog_samples (
    run_id   INTEGER,
    t_ns     BIGINT,                    -- when it was asked (wall clock)
    packets  BIGINT,                    -- tc's qlen of the queue under the rate limiter
    bytes    BIGINT,                    -- its backlog
    drops    BIGINT                     -- its drops so far
);

-- The short flows of a run (--short): a row per transfer the client
-- planned, as it recorded its end (short.jsonl), and its completion time
-- from the sender capture (analyzers/sql/short_fct.sql).
CREATE TABLE IF NOT EXISTS short_flows (
    run_id      INTEGER,
    id          INTEGER,                -- 1.. in order of planned arrival
    bytes       BIGINT,                 -- its size, which is its class
    planned_s   DOUBLE,                 -- its arrival, s after the flows' start
    start_ns    BIGINT,                 -- connect() called (wall clock), NULL: never began
    sport       INTEGER,                -- its client port
    outcome     VARCHAR,                -- complete, cut, never connected, failed
    sent        BIGINT,                 -- bytes the client wrote
    app_fct_ms  DOUBLE,                 -- connect() to the server's close, the client's clock
    conn        UINTEGER,               -- its connection in the sender capture
    fct_ms      DOUBLE                  -- its first SYN to the first ACK of its last byte there
);

-- A parking lot's hops (--topology parking-lot): each hop's router and the
-- captures of what entered it (hop 1's: the sender capture) and what left
-- its queue, for the per-hop fidelity check. A dumbbell run has none.
CREATE TABLE IF NOT EXISTS hops (
    run_id             INTEGER,
    hop                INTEGER,         -- 1 .. hops, in the order the flows cross them
    router             VARCHAR,         -- rl, p1, p2 ..
    arrivals_capture   INTEGER,         -- capture_id: what entered the router
    departures_capture INTEGER,         -- capture_id: what left the hop's queue
    PRIMARY KEY (run_id, hop)
);
-- iperf3's per-interval reports (sender side), one row per flow and interval.
CREATE TABLE IF NOT EXISTS iperf_intervals (
    run_id      INTEGER,
    flow        INTEGER,
    start_s     DOUBLE,                 -- seconds since the flow's start
    end_s       DOUBLE,
    bytes       BIGINT,
    bps         DOUBLE,
    retransmits BIGINT,
    snd_cwnd    BIGINT,                 -- bytes, from TCP_INFO at the interval's end
    rtt_us      BIGINT,
    rttvar_us   BIGINT
);

-- tcp_probe events (stock, extended tracepoint, or the eBPF hook); the
-- fields of the extended record are NULL when the source lacks them.
CREATE TABLE IF NOT EXISTS probe_events (
    run_id        INTEGER,
    flow          INTEGER,              -- the run's flow, NULL when it matches none
    ts_ns         BIGINT,               -- ns since the Unix epoch
    cookie        UBIGINT,              -- socket cookie
    saddr         VARCHAR,
    sport         USMALLINT,
    daddr         VARCHAR,
    dport         USMALLINT,
    data_len      UINTEGER,
    snd_nxt       UINTEGER,
    snd_una       UINTEGER,
    snd_cwnd      UINTEGER,             -- packets
    ssthresh      UINTEGER,             -- packets
    snd_wnd       UINTEGER,             -- bytes
    rcv_wnd       UINTEGER,             -- bytes
    srtt_us       UINTEGER,
    rttvar_us     UINTEGER,
    rto_us        UINTEGER,
    rto_var_us    UINTEGER,             -- the term the RTO adds to srtt (tp->rttvar_us)
    packets_out   UINTEGER,
    retrans_out   UINTEGER,
    lost_out      UINTEGER,
    sacked_out    UINTEGER,
    ca_state      UTINYINT,             -- 0 Open, 1 Disorder, 2 CWR, 3 Recovery, 4 Loss
    retransmits   UTINYINT,
    backoff       UTINYINT,
    delivered     UINTEGER,
    total_retrans UINTEGER,
    pacing_rate   UBIGINT,              -- bytes per second
    wbrto_cwnd    UINTEGER,             -- WB-RTO: the draw of the RTO in force (patched kernel)
    wbrto_max_cwnd UINTEGER,
    wbrto_awnd    UINTEGER,
    wbrto_c10     UINTEGER,             -- penalty c, tenths
    wbrto_a10     UINTEGER,             -- weight a_i, tenths
    ngwa_window   UINTEGER,             -- NGWA window kept by the socket (0 when off)
    side          VARCHAR               -- 'sender' or 'receiver' of its flow, NULL without one
);
-- stores written before the side column: add it and fill it in (the
-- sender's socket has the flow's source port as its local port)
ALTER TABLE probe_events ADD COLUMN IF NOT EXISTS side VARCHAR;
UPDATE probe_events e
SET side = CASE WHEN e.sport = f.src_port THEN 'sender' ELSE 'receiver' END
FROM flows f
WHERE e.side IS NULL AND e.flow IS NOT NULL AND f.run_id = e.run_id AND f.flow = e.flow;
-- stores written before WB-RTO reported the cwnd of its draw
ALTER TABLE probe_events ADD COLUMN IF NOT EXISTS wbrto_cwnd UINTEGER;
-- stores written before tcp_probe reported the RTO's variance term
ALTER TABLE probe_events ADD COLUMN IF NOT EXISTS rto_var_us UINTEGER;
-- stores written before studies: runs get their study and cell columns
ALTER TABLE runs ADD COLUMN IF NOT EXISTS study VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS cell VARCHAR;
-- stores written before the fidelity check: what a run's manifest says of
-- its captures' drops, its CPUs and its clock (NULL: not recorded)
ALTER TABLE runs ADD COLUMN IF NOT EXISTS capture_drops BIGINT;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS cpu_busy_frac DOUBLE;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS cpu_saturated_frac DOUBLE;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS clock VARCHAR;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS icount_shift INTEGER;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS dilation DOUBLE;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS softnet_dropped BIGINT;
ALTER TABLE runs ADD COLUMN IF NOT EXISTS host_wait_frac DOUBLE;

-- The fidelity check of a run (analyzers/fidelity.py, docs/run.md): did the
-- emulation deliver what was asked? Each item's status is 'pass', 'fail',
-- 'not applicable' or 'unknown' (its data is missing).
CREATE TABLE IF NOT EXISTS fidelity (
    run_id             INTEGER PRIMARY KEY,
    verdict            VARCHAR,         -- 'pass', 'fail' or 'unknown'
    reasons            VARCHAR,         -- the failed items, '; ' between them
    bottleneck_status  VARCHAR,
    bottleneck_mbps    DOUBLE,          -- delivered while backlogged, worst step
    bottleneck_asked_mbps DOUBLE,       -- the rate in force in that step
    backlogged_departures BIGINT,       -- departures with the queue non-empty, all steps
    bottleneck_steps   JSON,            -- per step of the schedule: t_s, asked_bps, bps, departures, status
    rtt_status         VARCHAR,
    rtt_min_ms         DOUBLE,
    rtt_asked_ms       DOUBLE,
    rtt_low_ms         DOUBLE,          -- the range the minimum had to fall in
    rtt_high_ms        DOUBLE,
    rtt_source         VARCHAR,         -- 'pcap' (sender capture) or 'probe' (min srtt)
    loss_status        VARCHAR,
    loss_asked_pct     DOUBLE,
    netem_packets      BIGINT,          -- packets the forward netem took (sent + dropped)
    netem_drops        BIGINT,
    loss_p_value       DOUBLE,          -- two-sided exact binomial test
    capture_status     VARCHAR,
    capture_drops      BIGINT,
    probe_status       VARCHAR,
    probe_lost         BIGINT,
    probe_events       BIGINT,
    cpu_status         VARCHAR,
    cpu_busy_frac      DOUBLE,
    cpu_saturated_frac DOUBLE,
    clock              VARCHAR,         -- 'real' or 'virtual'
    softnet_status     VARCHAR,
    softnet_dropped    BIGINT,          -- packets dropped from full CPU backlogs during the run
    emulator_status    VARCHAR,
    host_wait_frac     DOUBLE           -- of the host CPU time the micro-VM wanted, waited for
);
-- stores checked before the emulator item
ALTER TABLE fidelity ADD COLUMN IF NOT EXISTS emulator_status VARCHAR;
ALTER TABLE fidelity ADD COLUMN IF NOT EXISTS host_wait_frac DOUBLE;
-- stores written before ECN was counted: per connection and direction, the
-- packets whose IP header says ECT(0) or ECT(1), or CE (a queue marked
-- them), and those with TCP's ECE and CWR flags
ALTER TABLE dir_counters ADD COLUMN IF NOT EXISTS ect_packets BIGINT;
ALTER TABLE dir_counters ADD COLUMN IF NOT EXISTS ce_packets BIGINT;
ALTER TABLE dir_counters ADD COLUMN IF NOT EXISTS ece_packets BIGINT;
ALTER TABLE dir_counters ADD COLUMN IF NOT EXISTS cwr_packets BIGINT;
-- and before a flow had its own RTT and ECN: the base RTT asked for its
-- path (--rtt) and whether its sender asked for ECN (--ecn)
ALTER TABLE flows ADD COLUMN IF NOT EXISTS base_rtt_ms DOUBLE;
ALTER TABLE flows ADD COLUMN IF NOT EXISTS ecn BOOLEAN;
-- and before flows could go the other way (--reverse): 'forward' or 'reverse'
ALTER TABLE flows ADD COLUMN IF NOT EXISTS direction VARCHAR;
-- and before the parking lot: a cross flow's hop, NULL for a flow through them all
ALTER TABLE flows ADD COLUMN IF NOT EXISTS hop INTEGER;
-- and before a late client was cut: how its iperf3 client ended, 'complete',
-- 'cut' (ended after its planned end) or 'never connected'
ALTER TABLE flows ADD COLUMN IF NOT EXISTS outcome VARCHAR;
-- and before application-limited flows: the sender's rate (--rate), NULL
-- for a flow as fast as TCP goes
ALTER TABLE flows ADD COLUMN IF NOT EXISTS rate_bps DOUBLE;
-- and before finite flows (--size): its bytes, NULL for a flow that ran its
-- duration, and its completion time in the sender capture (first SYN to the
-- first ACK of its last byte, as a short flow's)
ALTER TABLE flows ADD COLUMN IF NOT EXISTS size_bytes BIGINT;
ALTER TABLE flows ADD COLUMN IF NOT EXISTS fct_ms DOUBLE;
