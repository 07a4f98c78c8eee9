-- What the store's own database defines besides its tables' rows, one row
-- per object (kind, schema, name, the table it belongs to). store/db.py
-- holds it against what schema.sql, views.sql and segments.py create: a
-- store may be somebody else's, and a macro or a view in it would run in
-- tcpvar's queries (a macro named sqrt replaces the built-in).
SELECT DISTINCT replace(function_type, '_', ' ') AS kind, schema_name, function_name AS name,
       NULL AS on_table
FROM duckdb_functions() WHERE database_name = current_database() AND NOT internal
UNION ALL
SELECT 'view', schema_name, view_name, NULL
FROM duckdb_views() WHERE database_name = current_database() AND NOT internal
UNION ALL
SELECT 'sequence', schema_name, sequence_name, NULL
FROM duckdb_sequences() WHERE database_name = current_database()
UNION ALL
SELECT 'index', schema_name, index_name, table_name
FROM duckdb_indexes() WHERE database_name = current_database()
UNION ALL
SELECT 'type', schema_name, type_name, NULL
FROM duckdb_types() WHERE database_name = current_database() AND NOT internal
UNION ALL
SELECT 'schema', schema_name, schema_name, NULL
FROM duckdb_schemas() WHERE database_name = current_database() AND NOT internal
UNION ALL
SELECT 'table', schema_name, table_name, NULL
FROM duckdb_tables() WHERE database_name = current_database()
UNION ALL
-- expressions a table runs on insert or read: defaults, generated columns,
-- checks (tcpvar's tables have none)
SELECT 'column expression', schema_name, column_name, table_name
FROM duckdb_columns() WHERE database_name = current_database() AND column_default IS NOT NULL
UNION ALL
SELECT DISTINCT lower(constraint_type) || ' constraint', schema_name, NULL, table_name
FROM duckdb_constraints()
WHERE database_name = current_database() AND constraint_type NOT IN ('PRIMARY KEY', 'NOT NULL')
ORDER BY 1, 2, 3
