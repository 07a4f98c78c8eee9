-- A capture's row as its load begins, not yet complete: the store drops
-- it, its rows and its segments if the load never ends (store/db.py).
-- Parameters: $1 path, $2 size_bytes, $3 mtime_ns, $4 fingerprint,
-- $5 with_packets, $6 rto_min_ms, $7 hwdup_us, $8 tcpvar_version.
INSERT INTO captures (capture_id, path, size_bytes, mtime_ns, fingerprint, with_packets,
                      rto_min_ms, hwdup_us, analyzed_at, tcpvar_version, complete)
VALUES (nextval('capture_ids'), $1, $2, $3, $4, $5, $6, $7, now(), $8, false)
RETURNING capture_id
