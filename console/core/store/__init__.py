"""The database store's pure parts: the schema and its migrations (schema.py), the rows of
each table made from records and back (rows.py), and the filters of a query (queries.py).

No I/O here: console/services/store/ opens the database (SQLite, PostgreSQL later) and runs
these statements. docs/store.md describes the whole."""
