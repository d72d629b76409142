# The PostgreSQL driver: libpq.
LIBS_pg := -lpq
CFLAGS_pg := -I/usr/include/postgresql
