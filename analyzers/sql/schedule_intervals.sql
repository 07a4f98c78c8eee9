-- Per run of $run_ids that has a bandwidth schedule, and per interval of
-- that schedule (from one step to the next, the last to the run's end):
-- iperf3's rate in it, summed over the flows. A report counts in the
-- interval its midpoint falls in (reports are 1 s; a flow's report times
-- are since its start, which for the first flow is the schedule's start).
-- The "Interval 1..3" columns of Callegari et al.'s Table 5.
-- Parameter: $run_ids (INTEGER[]).
WITH sched AS (
    SELECT run_id, (params ->> '$.duration_s')::DOUBLE AS duration_s,
           from_json(params -> '$.schedule', '[{"t_s": "DOUBLE", "bw_bps": "DOUBLE"}]') AS steps
    FROM runs
    WHERE list_contains($run_ids::INTEGER[], run_id)
), numbered AS (
    SELECT run_id, duration_s, steps, unnest(range(1, len(steps) + 1)) AS i
    FROM sched
), intervals AS (
    SELECT run_id, i, steps[i].t_s AS start_s, coalesce(steps[i + 1].t_s, duration_s) AS end_s
    FROM numbered
), per_flow AS (
    SELECT v.run_id, v.i, q.flow,
           8 * sum(q.bytes) / nullif(sum(q.end_s - q.start_s), 0) AS bps
    FROM intervals v
    JOIN iperf_intervals q ON q.run_id = v.run_id
     AND (q.start_s + q.end_s) / 2 >= v.start_s AND (q.start_s + q.end_s) / 2 < v.end_s
    GROUP BY ALL
)
SELECT run_id, i AS interval, sum(bps) / 1e6 AS mbps
FROM per_flow
GROUP BY ALL
ORDER BY run_id, interval
