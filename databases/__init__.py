"""The database servers stores live in: private PostgreSQL, MariaDB and slapd instances the
suite starts, and lent servers named by --store-url. A loader is handed one, never starts it."""
