-- The per-interval goodput of run $run_id's flows that share its first
-- bottleneck (forward, and in a parking lot through hop 1), from the
-- sender capture's throughput series: per flow and bin, the bin's start
-- (seconds since the capture's first packet) and the goodput; with the
-- flow's planned start and its first data packet on the same axis.
SELECT f.flow, f.start_s, (s.data_first_ns - c.first_ns) / 1e9 AS first_data_s,
       t.bin, t.t_s, t.goodput_bps
FROM flows f
JOIN runs r USING (run_id)
JOIN captures c ON c.capture_id = r.sender_capture
JOIN connections k ON k.capture_id = r.sender_capture AND k.conn = f.conn
JOIN conn_stats s ON s.capture_id = k.capture_id AND s.conn = k.conn
                 AND s.dir = CASE WHEN k.a_port = f.src_port THEN 0 ELSE 1 END
JOIN throughput t ON t.capture_id = k.capture_id AND t.conn = k.conn AND t.dir = s.dir
WHERE f.run_id = $run_id AND f.direction IS DISTINCT FROM 'reverse'
  AND coalesce(f.hop, 1) = 1
ORDER BY f.flow, t.bin
