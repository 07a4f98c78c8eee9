-- Senders' per-packet series from a capture, one row per sender and time
-- column of $col_ns (min/max decimation: a figure shows every extreme, not
-- every packet), all senders in one scan. The receiver's ACKs carry the
-- sender's bytes in flight and the RTT samples (Karn's rule); its SYNs and
-- ACKs the advertised window; the sender's data packets the NGWA window a
-- router wrote (unset ones left out).
-- Parameters: $capture_id, $conns (UINTEGER[]) and $dirs (UTINYINT[], each
-- sender's data direction), $origin_ns, $t0_ns, $t1_ns, $col_ns.
WITH chosen AS (
    SELECT unnest($conns::UINTEGER[]) AS conn, unnest($dirs::UTINYINT[]) AS sdir
)
SELECT p.conn, c.sdir, (p.ts_ns - $origin_ns) // $col_ns * $col_ns / 1e9 AS t_s,
       max(p.inflight) FILTER (WHERE p.dir <> c.sdir) AS inflight_max,
       min(p.rtt_us) FILTER (WHERE p.dir <> c.sdir) / 1e3 AS rtt_min_ms,
       max(p.rtt_us) FILTER (WHERE p.dir <> c.sdir) / 1e3 AS rtt_max_ms,
       min(p.win) FILTER (WHERE p.dir <> c.sdir AND p.flags & 18 <> 0) AS win_min,
       max(p.win) FILTER (WHERE p.dir <> c.sdir AND p.flags & 18 <> 0) AS win_max,
       min(p.ngwa_window) FILTER (WHERE p.dir = c.sdir
                                    AND p.ngwa_window <> 4294967295) AS ngwa_min
FROM packets p JOIN chosen c USING (conn)
WHERE p.capture_id = $capture_id AND p.ts_ns BETWEEN $t0_ns AND $t1_ns
GROUP BY ALL ORDER BY 1, 2, 3
