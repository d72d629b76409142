"""Private instances of the real servers (PostgreSQL, MariaDB, slapd, named), one module each."""
