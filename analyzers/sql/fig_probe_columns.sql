-- tcp_probe's view of flows' sending sockets, one row per flow and time
-- column of $col_ns (min/max decimation), all flows in one scan: cwnd and
-- ssthresh in packets (Linux's "infinite" initial ssthresh left out), srtt
-- and the RTO in ms, and the worst congestion state of the column
-- (0 Open ... 4 Loss).
-- Parameters: $run_id, $flows (INTEGER[]), $origin_ns, $t0_ns, $t1_ns, $col_ns.
SELECT flow, (ts_ns - $origin_ns) // $col_ns * $col_ns / 1e9 AS t_s,
       min(snd_cwnd) AS cwnd_min, max(snd_cwnd) AS cwnd_max,
       min(ssthresh) FILTER (WHERE ssthresh < 2147483647) AS ssthresh_min,
       max(ssthresh) FILTER (WHERE ssthresh < 2147483647) AS ssthresh_max,
       min(srtt_us) FILTER (WHERE srtt_us > 0) / 1e3 AS srtt_min_ms,
       max(srtt_us) FILTER (WHERE srtt_us > 0) / 1e3 AS srtt_max_ms,
       min(rto_us) / 1e3 AS rto_min_ms, max(rto_us) / 1e3 AS rto_max_ms,
       max(ca_state) AS ca_state
FROM probe_events
WHERE run_id = $run_id AND list_contains($flows::INTEGER[], flow) AND side = 'sender'
  AND ts_ns BETWEEN $t0_ns AND $t1_ns
GROUP BY ALL ORDER BY 1, 2
