# The LDAP driver: OpenLDAP's client libraries.
LIBS_ldap := -lldap -llber
