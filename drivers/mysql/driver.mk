# The MariaDB driver: the client library as mysql_config names it.
LIBS_mysql := $(shell mysql_config --libs)
CFLAGS_mysql := $(shell mysql_config --cflags)
