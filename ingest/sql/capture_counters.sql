-- Capture $1's per-direction counters from the scanner's table _tv_stats
-- (its hardware copies become the capture's warning instead).
INSERT INTO dir_counters BY NAME
SELECT $1 AS capture_id, * EXCLUDE (hw_copies) FROM _tv_stats
