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

-- One row per TCP segment (column meanings in docs/schema.md).
CREATE TABLE IF NOT EXISTS packets (
    capture_id INTEGER,
    frame      UINTEGER,
    ts_ns      BIGINT,
    conn       UINTEGER,
    dir        UTINYINT,
    seq        BIGINT,
    ack        BIGINT,
    flags      UTINYINT,
    win        UINTEGER,
    len        UINTEGER,
    wire_len   UINTEGER,
    ev         USMALLINT,
    tsval      UINTEGER,
    tsecr      UINTEGER,
    rtt_us     UINTEGER,
    inflight   UINTEGER,
    mss        USMALLINT,
    wscale     UTINYINT,
    ngwa_window UINTEGER,
    sack_l     BIGINT[],
    sack_r     BIGINT[]
);

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
