"""Where stores' data lives, and how the suite runs it (database.py: `Database`, one per store).

Per engine a `Database` implementation beside its server: postgresql.py, mariadb.py and
slapd.py (a private instance the suite starts, or a lent one a --store-url names, each with
its own lifecycle), berkeley.py (the statistics of a Berkeley DB environment); a store
without a server has a `DirectoryDatabase`. url.py parses and prints --store-url URLs;
store_urls.py chooses a command's server per store, private or lent. A loader is handed a
target a database yields, never starts one; nothing here imports loaders/: what a database
must know of a loader's layout (its schema, how to claim a lent database) the loader hands in.
"""
