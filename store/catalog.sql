-- What the store's own database defines besides its tables' rows, one row
-- per object (kind, schema, name, the table it belongs to). store/db.py
-- holds it against what schema.sql, views.sql and segments.py create: a
-- store may be somebody else's, and a macro or a view in it would run in
-- tcpvar's queries (a macro named sqrt replaces the built-in).
-- Every function is named with its catalog (system.main.): a store's own
-- macro named duckdb_functions or current_database would hide the rest.
SELECT DISTINCT system.main.replace(function_type, '_', ' ') AS kind, schema_name, function_name AS name,
       NULL AS on_table
FROM system.main.duckdb_functions() WHERE database_name = system.main.current_database() AND NOT internal
UNION ALL
SELECT 'view', schema_name, view_name, NULL
FROM system.main.duckdb_views() WHERE database_name = system.main.current_database() AND NOT internal
UNION ALL
SELECT 'sequence', schema_name, sequence_name, NULL
FROM system.main.duckdb_sequences() WHERE database_name = system.main.current_database()
UNION ALL
SELECT 'index', schema_name, index_name, table_name
FROM system.main.duckdb_indexes() WHERE database_name = system.main.current_database()
UNION ALL
-- SQL a table runs on insert, update or delete
SELECT 'trigger', schema_name, trigger_name, table_name
FROM system.main.duckdb_triggers() WHERE database_name = system.main.current_database()
UNION ALL
SELECT 'type', schema_name, type_name, NULL
FROM system.main.duckdb_types() WHERE database_name = system.main.current_database() AND NOT internal
UNION ALL
SELECT 'schema', schema_name, schema_name, NULL
FROM system.main.duckdb_schemas() WHERE database_name = system.main.current_database() AND NOT internal
UNION ALL
SELECT 'table', schema_name, table_name, NULL
FROM system.main.duckdb_tables() WHERE database_name = system.main.current_database()
UNION ALL
-- expressions a table runs on insert or read: defaults, generated columns,
-- checks (tcpvar's tables have none)
SELECT 'column expression', schema_name, column_name, table_name
FROM system.main.duckdb_columns() WHERE database_name = system.main.current_database() AND column_default IS NOT NULL
UNION ALL
SELECT DISTINCT system.main.lower(constraint_type) || ' constraint', schema_name, NULL, table_name
FROM system.main.duckdb_constraints()
WHERE database_name = system.main.current_database() AND constraint_type NOT IN ('PRIMARY KEY', 'NOT NULL')
ORDER BY 1, 2, 3
