-- How each direction's throughput series is laid out, from the capture's sums
-- (tv_sums: conn, dir, bin, packets, bytes, unique_bytes; a bin may have
-- several rows). Dense, every interval from the direction's first data
-- interval to its last, so that a stall shows as zeros, unless the span is
-- more than $max_span intervals, or the empty intervals of the dense
-- directions, counted from the direction with the fewest, would be more than
-- $max_fill in the capture: two 1-byte segments 10^7 s apart would make 10^8
-- rows. Such a direction is sparse (throughput.sql). `beyond`: its intervals
-- with data past the largest bin number the series holds (an INTEGER).
-- Parameters: $max_span, $max_fill.
CREATE OR REPLACE TEMP TABLE tv_shape AS
WITH spans AS (
    SELECT conn, dir, min(bin) AS lo, max(bin) AS hi, count(DISTINCT bin) AS data_bins,
           count(DISTINCT bin) FILTER (WHERE bin > 2147483647) AS beyond
    FROM tv_sums
    GROUP BY ALL
),
fills AS (
    SELECT *, hi - lo + 1 AS span, hi - lo + 1 - data_bins AS fill FROM spans
)
SELECT conn, dir, lo, hi, span, data_bins, beyond,
       span <= $max_span::BIGINT
       AND sum(CASE WHEN span <= $max_span::BIGINT THEN fill ELSE 0 END)
           OVER (ORDER BY fill, conn, dir) <= $max_fill::BIGINT AS dense
FROM fills;
