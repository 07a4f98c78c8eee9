-- Capture $1 complete: what the scan found of the file as a whole.
-- Parameters: $2 link_type, $3 link_name, $4 frames, $5 tcp_packets,
-- $6 non_tcp, $7 ip_fragments, $8 too_short, $9 malformed, $10 first_ns,
-- $11 last_ns, $12 truncated, $13 warning, $14 interval_ms.
UPDATE captures SET link_type = $2, link_name = $3, frames = $4,
    tcp_packets = $5, non_tcp = $6, ip_fragments = $7, too_short = $8,
    malformed = $9, first_ns = $10, last_ns = $11, truncated = $12,
    warning = $13, interval_ms = $14, complete = true
WHERE capture_id = $1
