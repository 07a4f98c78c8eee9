-- The smallest RTT any flow of a run saw (the fidelity check): from the
-- sender capture, the minimum RTT sample of each flow's data direction
-- (taken at rl: from a data packet arriving at the bottleneck router to the
-- ACK arriving back), else tcp_probe's smallest srtt of a sending socket.
-- Parameter: $run_id.
SELECT (SELECT min(d.rtt_min) / 1e3
        FROM flows f
        JOIN runs r ON r.run_id = f.run_id
        JOIN connections c ON c.capture_id = r.sender_capture AND c.conn = f.conn
        JOIN dir_counters d ON d.capture_id = c.capture_id AND d.conn = c.conn
         AND d.dir = if(c.a_port = f.src_port, 0, 1)
        WHERE f.run_id = $run_id AND d.rtt_n > 0 AND d.rtt_min >= 0) AS pcap_ms,
       (SELECT min(e.srtt_us) / 1e3
        FROM probe_events e JOIN flows f ON f.run_id = e.run_id AND f.flow = e.flow
        WHERE e.run_id = $run_id AND e.sport = f.src_port AND e.srtt_us > 0) AS probe_ms
