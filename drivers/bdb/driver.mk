# The Berkeley DB driver: libdb and what it shares with bdbhpt.
LIBS_bdb := -ldb
SRC_bdb := $(BERKELEY_SRC)
