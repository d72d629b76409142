# The BDBHPT driver: libdb and what it shares with bdb.
LIBS_bdbhpt := -ldb
SRC_bdbhpt := $(BERKELEY_SRC)
