-- report.tables.si() for the tables DuckDB lays out (connection_lines.sql):
-- @v to 3 significant digits with an SI prefix, then @unit; "-" for NULL.
-- A macro of the connection's own (TEMP): the store's file is not changed.
CREATE OR REPLACE TEMP MACRO tv_si(v, unit) AS CASE
    WHEN v IS NULL THEN '-'
    WHEN abs(v) >= 1e9 THEN printf('%.3g G', v / 1e9) || unit
    WHEN abs(v) >= 1e6 THEN printf('%.3g M', v / 1e6) || unit
    WHEN abs(v) >= 1e3 THEN printf('%.3g k', v / 1e3) || unit
    ELSE rtrim(printf('%.3g ', v::DOUBLE) || unit) END
