-- A sender's per-packet series from a capture, one row per time column of
-- $col_ns (min/max decimation: a figure shows every extreme, not every
-- packet). The receiver's ACKs carry the sender's bytes in flight and the
-- RTT samples (Karn's rule); its SYNs and ACKs the advertised window; the
-- sender's data packets the NGWA window a router wrote (unset ones left out).
-- Parameters: $capture_id, $conn, $dir (the sender's), $origin_ns, $t0_ns,
-- $t1_ns, $col_ns.
SELECT (ts_ns - $origin_ns) // $col_ns * $col_ns / 1e9 AS t_s,
       max(inflight) FILTER (WHERE dir = 1 - $dir) AS inflight_max,
       min(rtt_us) FILTER (WHERE dir = 1 - $dir) / 1e3 AS rtt_min_ms,
       max(rtt_us) FILTER (WHERE dir = 1 - $dir) / 1e3 AS rtt_max_ms,
       min(win) FILTER (WHERE dir = 1 - $dir AND flags & 18 <> 0) AS win_min,
       max(win) FILTER (WHERE dir = 1 - $dir AND flags & 18 <> 0) AS win_max,
       min(ngwa_window) FILTER (WHERE dir = $dir AND ngwa_window <> 4294967295) AS ngwa_min
FROM packets
WHERE capture_id = $capture_id AND conn = $conn AND ts_ns BETWEEN $t0_ns AND $t1_ns
GROUP BY 1 ORDER BY 1
