/*
 * prober: measures DNS latency one query at a time.
 *
 *   prober [-n COUNT] [-l SECONDS] [-i INTERVAL_US [-O]] [-t TIMEOUT_MS] [-o FILE] [-D] [-R]
 *          [-m udp|tcp|tcp-new] ADDR PORT QUERYFILE
 *       Sends COUNT queries (the query file's lines, cycled; with -l, as many as fit in SECONDS
 *       and at most COUNT; with -i, at most one every INTERVAL_US, so that sampling latency
 *       beside a load does not add a load of its own) to ADDR:PORT over UDP, each only
 *       after the previous one was answered or timed out (closed loop); with -O (open loop),
 *       one every INTERVAL_US on a fixed schedule, whether or not earlier ones were answered,
 *       so that a slow answer does not hold back the queries after it. Writes one latency in
 *       nanoseconds per answered query, one per line, to FILE (default stdout). A last line on
 *       stderr sums up: "summary sent=N answered=N lost=N ports=N" (ports: distinct source
 *       ports used).
 *
 *       With -R (record), FILE gets one line per query sent instead, answered or not:
 *       "SENT_NS RCODE LATENCY_NS", SENT_NS on CLOCK_MONOTONIC (the clock Python's
 *       time.monotonic_ns reads, so a caller can line queries up with what it did meanwhile),
 *       RCODE the answer's (0 NOERROR, 2 SERVFAIL, 3 NXDOMAIN, ...), and "SENT_NS -1 -1" for a
 *       query lost (no answer within the time-out, or the send refused): what a run through a
 *       failure needs, second by second (bench/measure/faults.py).
 *
 *       With -m tcp, every query goes over a TCP connection of its own (RFC 7766 framing: a
 *       two-octet length before the message), connected before its clock starts: the latency
 *       of a query on an open connection. With -m tcp-new the clock starts before the
 *       connection is made: the latency a client that connects for each query sees, the
 *       handshake included. A connection refused, reset or closed before the answer is a
 *       lost query.
 *
 *       Every query goes out from a socket of its own, opened before its clock starts: named
 *       listens with one SO_REUSEPORT socket per worker thread and the kernel picks the socket
 *       by hashing the client's address and port, so queries from one socket would all reach
 *       one worker, and with several workers the prober would sample only that one
 *       (docs/loaded-latency.md).
 *   prober --responder PORT
 *       Answers every UDP datagram on 127.0.0.1:PORT with the datagram itself, QR bit set, so
 *       that the prober's own floor on loopback can be measured. Port 0 picks a free port; the
 *       port in use is printed first as "port N".
 *
 * The query file has dnsperf's format: "NAME TYPE" per line, ';' starts a comment line.
 * Queries are built like dnsperf builds them (RD set, no EDNS, class IN) so that both tools
 * ask the server the same questions; with -D, like dnsperf -D: an EDNS0 OPT record
 * advertising 4096 octets with the DO bit set, so signed zones are answered with signatures.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAX_WIRE_NAME 255
#define MAX_LABEL 63
#define HEADER_LEN 12
#define OPT_LEN 11
#define MAX_QUERY (HEADER_LEN + MAX_WIRE_NAME + 4 + OPT_LEN)
/* dnsperf's MAX_EDNS_PACKET: the payload its -D queries advertise. */
#define EDNS_PAYLOAD 4096
#define MAX_DATAGRAM 65535
/* What a stream reply is read to: its length prefix, ID, flags and RCODE octets. */
#define STREAM_HEAD 6

enum transport { T_UDP, T_TCP, T_TCP_NEW };

struct query {
    unsigned char wire[MAX_QUERY];
    size_t len;
};

struct type_name {
    const char *name;
    uint16_t code;
};

static const struct type_name TYPES[] = {
    {"A", 1},      {"NS", 2},     {"CNAME", 5},  {"SOA", 6},    {"PTR", 12},
    {"HINFO", 13}, {"MX", 15},    {"TXT", 16},   {"AAAA", 28},  {"LOC", 29},
    {"SRV", 33},   {"NAPTR", 35}, {"DNAME", 39}, {"DS", 43},    {"SSHFP", 44},
    {"AXFR", 252}, {"ANY", 255},  {"CAA", 257},
};

static void die(const char *what)
{
    fprintf(stderr, "prober: %s\n", what);
    exit(2);
}

static void die_line(const char *what, size_t lineno)
{
    fprintf(stderr, "prober: query file line %zu: %s\n", lineno, what);
    exit(2);
}

static int parse_type(const char *text, uint16_t *code)
{
    for (size_t i = 0; i < sizeof(TYPES) / sizeof(TYPES[0]); i++) {
        if (strcasecmp(text, TYPES[i].name) == 0) {
            *code = TYPES[i].code;
            return 0;
        }
    }
    if (strncasecmp(text, "TYPE", 4) == 0 && isdigit((unsigned char)text[4])) {
        char *end;
        unsigned long value = strtoul(text + 4, &end, 10);
        if (*end == '\0' && value <= 65535) {
            *code = (uint16_t)value;
            return 0;
        }
    }
    return -1;
}

/* One character of a label: "\DDD" (decimal byte), "\X" (X literally) or a plain byte. */
static int next_label_byte(const char **p, unsigned char *out)
{
    const char *s = *p;
    if (*s != '\\') {
        *out = (unsigned char)*s;
        *p = s + 1;
        return 0;
    }
    if (isdigit((unsigned char)s[1])) {
        if (!isdigit((unsigned char)s[2]) || !isdigit((unsigned char)s[3]))
            return -1;
        int value = (s[1] - '0') * 100 + (s[2] - '0') * 10 + (s[3] - '0');
        if (value > 255)
            return -1;
        *out = (unsigned char)value;
        *p = s + 4;
        return 0;
    }
    if (s[1] == '\0')
        return -1;
    *out = (unsigned char)s[1];
    *p = s + 2;
    return 0;
}

/* Presentation name -> wire name; returns its length or -1. "." and "" are the root. */
static int name_to_wire(const char *text, unsigned char *wire)
{
    size_t pos = 0;
    const char *p = text;
    if (strcmp(text, ".") == 0)
        p = "";
    while (*p != '\0') {
        size_t label_at = pos++;
        size_t label_len = 0;
        while (*p != '\0' && *p != '.') {
            unsigned char byte;
            if (next_label_byte(&p, &byte) != 0)
                return -1;
            if (label_len == MAX_LABEL || pos + 1 >= MAX_WIRE_NAME)
                return -1;
            wire[pos++] = byte;
            label_len++;
        }
        if (label_len == 0)
            return -1; /* empty label: ".." or a leading dot */
        wire[label_at] = (unsigned char)label_len;
        if (*p == '.')
            p++;
    }
    wire[pos++] = 0;
    return (int)pos;
}

static void build_query(const char *name, uint16_t type, struct query *q, size_t lineno)
{
    unsigned char *w = q->wire;
    memset(w, 0, HEADER_LEN);
    w[2] = 0x01; /* RD, as dnsperf sends it */
    w[5] = 1;    /* QDCOUNT */
    int name_len = name_to_wire(name, w + HEADER_LEN);
    if (name_len < 0)
        die_line("bad name", lineno);
    size_t pos = HEADER_LEN + (size_t)name_len;
    w[pos++] = (unsigned char)(type >> 8);
    w[pos++] = (unsigned char)(type & 0xff);
    w[pos++] = 0;
    w[pos++] = 1; /* class IN */
    q->len = pos;
}

/* An EDNS0 OPT record with the DO bit (RFC 3225) after the question, as dnsperf -D adds it. */
static void add_dnssec_ok(struct query *q)
{
    unsigned char *w = q->wire + q->len;
    w[0] = 0;                             /* owner: the root */
    w[1] = 0;
    w[2] = 41;                            /* type OPT */
    w[3] = (unsigned char)(EDNS_PAYLOAD >> 8);
    w[4] = (unsigned char)(EDNS_PAYLOAD & 0xff);
    w[5] = 0;                             /* extended rcode */
    w[6] = 0;                             /* version 0 */
    w[7] = 0x80;                          /* DO */
    w[8] = 0;
    w[9] = 0;                             /* no options: rdlength 0 */
    w[10] = 0;
    q->len += OPT_LEN;
    q->wire[11] = 1;                      /* ARCOUNT */
}

static struct query *read_queries(const char *path, size_t *count)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        die("cannot open the query file");
    struct query *queries = NULL;
    size_t n = 0, cap = 0, lineno = 0;
    char *line = NULL;
    size_t line_cap = 0;
    while (getline(&line, &line_cap, f) >= 0) {
        lineno++;
        char name[1024], type[64];
        if (line[0] == ';')
            continue;
        int fields = sscanf(line, "%1023s %63s", name, type);
        if (fields <= 0)
            continue;
        if (fields != 2)
            die_line("expected NAME TYPE", lineno);
        uint16_t code;
        if (parse_type(type, &code) != 0)
            die_line("unknown type", lineno);
        if (n == cap) {
            cap = cap ? cap * 2 : 256;
            queries = realloc(queries, cap * sizeof(*queries));
            if (queries == NULL)
                die("out of memory");
        }
        build_query(name, code, &queries[n++], lineno);
    }
    free(line);
    fclose(f);
    if (n == 0)
        die("the query file holds no query");
    *count = n;
    return queries;
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* A socket of `type` connected to the server; -1 when a stream connection is refused or times
   out (a lost query). */
static int connect_to(const char *addr, const char *port, int type, int64_t timeout_ns)
{
    struct sockaddr_in6 sa6;
    struct sockaddr_in sa4;
    char *end;
    unsigned long port_num = strtoul(port, &end, 10);
    if (*end != '\0' || port_num == 0 || port_num > 65535)
        die("bad port");
    memset(&sa4, 0, sizeof(sa4));
    memset(&sa6, 0, sizeof(sa6));
    int fd;
    int rc;
    if (inet_pton(AF_INET, addr, &sa4.sin_addr) == 1) {
        sa4.sin_family = AF_INET;
        sa4.sin_port = htons((uint16_t)port_num);
        fd = socket(AF_INET, type, 0);
    } else if (inet_pton(AF_INET6, addr, &sa6.sin6_addr) == 1) {
        sa6.sin6_family = AF_INET6;
        sa6.sin6_port = htons((uint16_t)port_num);
        fd = socket(AF_INET6, type, 0);
    } else {
        die("bad address (give a numeric IPv4 or IPv6 address)");
    }
    if (fd < 0)
        die("cannot open a socket");
    if (type == SOCK_STREAM) {
        /* On Linux SO_SNDTIMEO bounds a blocking connect too. */
        struct timeval tv = {.tv_sec = timeout_ns / 1000000000,
                             .tv_usec = (timeout_ns % 1000000000) / 1000};
        if (setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0)
            die("setsockopt failed");
    }
    if (sa4.sin_family == AF_INET)
        rc = connect(fd, (struct sockaddr *)&sa4, sizeof(sa4));
    else
        rc = connect(fd, (struct sockaddr *)&sa6, sizeof(sa6));
    if (rc != 0) {
        if (type == SOCK_STREAM && (errno == ECONNREFUSED || errno == EINPROGRESS ||
                                    errno == ETIMEDOUT || errno == EAGAIN)) {
            close(fd);
            return -1;
        }
        die("cannot connect a socket to the server");
    }
    return fd;
}

/* Sleeps until `when` (CLOCK_MONOTONIC nanoseconds), if it is still ahead. */
static void pace(int64_t when)
{
    int64_t left = when - now_ns();
    if (left <= 0)
        return;
    struct timespec ts = {.tv_sec = left / 1000000000, .tv_nsec = left % 1000000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* The local port the kernel gave a connected socket. */
static uint16_t source_port(int fd)
{
    struct sockaddr_storage local;
    socklen_t len = sizeof(local);
    if (getsockname(fd, (struct sockaddr *)&local, &len) != 0)
        die("getsockname failed");
    if (local.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&local)->sin6_port);
    return ntohs(((struct sockaddr_in *)&local)->sin_port);
}

/* One prober run: its options, the queries, and what it counted. */
struct run {
    const char *addr;
    const char *port;
    struct query *queries;
    size_t nqueries;
    long count;
    int64_t timeout_ns;
    int64_t interval_ns;
    int64_t end_ns;
    FILE *out;
    int record; /* -R: a line per query sent, with its RCODE, lost ones too */
    enum transport transport;
    long sent;
    long answered;
    long ports;
    uint16_t id;
    uint8_t port_seen[65536];
};

/* A query sent and not yet answered or timed out. */
struct flight {
    int fd;
    uint16_t id;
    int64_t start;
    unsigned char head[STREAM_HEAD]; /* over TCP: the reply's first octets so far */
    size_t have;
};

static void answered(struct run *r, const struct flight *f, int rcode)
{
    int64_t latency = now_ns() - f->start;
    if (r->record)
        fprintf(r->out, "%lld %d %lld\n", (long long)f->start, rcode, (long long)latency);
    else
        fprintf(r->out, "%lld\n", (long long)latency);
    r->answered++;
}

/* A query that got no answer: a line of its own when recording (-R). */
static void lost(struct run *r, int64_t start)
{
    if (r->record)
        fprintf(r->out, "%lld -1 -1\n", (long long)start);
}

/* Sends query number i from a socket of its own; 0 and *f filled in, or -1 when the kernel
   refused the send (the server's port is closed): a lost query, like a timeout. */
static int send_query(struct run *r, long i, struct flight *f)
{
    struct query *q = &r->queries[(size_t)i % r->nqueries];
    int64_t before_connect = now_ns();
    int fd = connect_to(r->addr, r->port, r->transport == T_UDP ? SOCK_DGRAM : SOCK_STREAM,
                        r->timeout_ns);
    r->sent++;
    if (fd < 0) {
        lost(r, before_connect);
        return -1;
    }
    uint16_t port = source_port(fd);
    r->ports += !r->port_seen[port];
    r->port_seen[port] = 1;
    r->id++;
    q->wire[0] = (unsigned char)(r->id >> 8);
    q->wire[1] = (unsigned char)(r->id & 0xff);
    f->fd = fd;
    f->id = r->id;
    f->have = 0;
    f->start = r->transport == T_TCP_NEW ? before_connect : now_ns();
    unsigned char framed[2 + MAX_QUERY];
    const unsigned char *out = q->wire;
    size_t len = q->len;
    if (r->transport != T_UDP) {
        framed[0] = (unsigned char)(q->len >> 8);
        framed[1] = (unsigned char)(q->len & 0xff);
        memcpy(framed + 2, q->wire, q->len);
        out = framed;
        len = q->len + 2;
    }
    if (send(fd, out, len, MSG_NOSIGNAL) != (ssize_t)len) {
        if (errno != ECONNREFUSED && errno != ECONNRESET && errno != EPIPE)
            die("send failed");
        close(fd);
        lost(r, f->start);
        return -1;
    }
    return 0;
}

/* Over TCP: the reply's RCODE once its first octets are in, -1 while they are not, -2 when the
   connection closed or was reset first, or the reply is not f's (a lost query). */
static int stream_reply_rcode(struct flight *f)
{
    ssize_t got = recv(f->fd, f->head + f->have, STREAM_HEAD - f->have, 0);
    if (got < 0) {
        if (errno == EINTR || errno == EAGAIN)
            return -1;
        if (errno == ECONNRESET)
            return -2;
        die("recv failed");
    }
    if (got == 0)
        return -2;
    f->have += (size_t)got;
    if (f->have < STREAM_HEAD)
        return -1;
    if ((f->head[4] & 0x80) && ((f->head[2] << 8) | f->head[3]) == f->id)
        return f->head[5] & 0x0f;
    return -2;
}

/* The reply to f's RCODE, if what waits on its socket is one; else -1 (-2 over TCP: lost). */
static int reply_rcode(const struct run *r, struct flight *f)
{
    if (r->transport != T_UDP)
        return stream_reply_rcode(f);
    unsigned char buf[MAX_DATAGRAM];
    ssize_t got = recv(f->fd, buf, sizeof(buf), 0);
    if (got < 0) {
        /* ICMP port unreachable shows up as ECONNREFUSED: the query is lost at its timeout. */
        if (errno == ECONNREFUSED || errno == EINTR || errno == EAGAIN)
            return -1;
        die("recv failed");
    }
    if (got >= HEADER_LEN && (buf[2] & 0x80) && ((buf[0] << 8) | buf[1]) == f->id)
        return buf[3] & 0x0f;
    return -1;
}

/* Waits for f's reply; its RCODE, or -1 at the deadline or when it is lost. Over UDP, stale
   replies to earlier, timed-out queries are skipped. */
static int await_reply(const struct run *r, struct flight *f, int64_t deadline_ns)
{
    for (;;) {
        int64_t left_ns = deadline_ns - now_ns();
        if (left_ns <= 0)
            return -1;
        struct pollfd pfd = {.fd = f->fd, .events = POLLIN};
        int ready = poll(&pfd, 1, (int)((left_ns + 999999) / 1000000));
        if (ready < 0 && errno != EINTR)
            die("poll failed");
        if (ready <= 0)
            continue;
        int rcode = reply_rcode(r, f);
        if (rcode == -2)
            return -1;
        if (rcode >= 0)
            return rcode;
    }
}

/* Closed loop: each query only after the previous one was answered or timed out (unloaded
   latency, and the prober's floor), with -i at most one every INTERVAL_US. */
static void run_sequential(struct run *r)
{
    int64_t next_ns = now_ns();
    for (long i = 0; i < r->count && now_ns() < r->end_ns; i++) {
        pace(next_ns);
        next_ns = now_ns() + r->interval_ns;
        struct flight f;
        if (send_query(r, i, &f) != 0)
            continue;
        int rcode = await_reply(r, &f, f.start + r->timeout_ns);
        if (rcode >= 0)
            answered(r, &f, rcode);
        else
            lost(r, f.start);
        close(f.fd);
    }
}

/* Room for `want` open sockets: the soft limit raised towards the hard one; how many fit. */
static size_t room_for_sockets(size_t want)
{
    struct rlimit lim;
    if (getrlimit(RLIMIT_NOFILE, &lim) != 0)
        die("getrlimit failed");
    rlim_t need = (rlim_t)want + 16; /* stdio, the query file, the output */
    if (lim.rlim_cur < need) {
        lim.rlim_cur = lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= need ? need
                                                                              : lim.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &lim) != 0)
            die("setrlimit failed");
    }
    return lim.rlim_cur > 16 + want ? want : (size_t)(lim.rlim_cur - 16);
}

/* Open loop: one query every INTERVAL_US on a fixed schedule, never waiting for a reply, so
   that a slow answer does not hold the next query back and the latency is that of queries
   arriving on their own schedule, as dnsperf -Q offers its load beside it. A send the
   prober itself falls behind for (descheduled) goes out at once and the schedule restarts
   from it: no burst to catch up, the fault of dnsperf 2.10's -Q. At most one timeout's worth
   of queries is in flight. */
static void run_open_loop(struct run *r)
{
    size_t cap = room_for_sockets((size_t)(r->timeout_ns / r->interval_ns) + 2);
    struct flight *fl = calloc(cap, sizeof(*fl));
    struct pollfd *pfds = calloc(cap, sizeof(*pfds));
    if (fl == NULL || pfds == NULL)
        die("out of memory");
    size_t n = 0;
    long i = 0;
    int64_t next_ns = now_ns();
    for (;;) {
        int64_t now = now_ns();
        int sending = i < r->count && now < r->end_ns;
        for (size_t k = n; k-- > 0;) {
            if (now - fl[k].start >= r->timeout_ns) {
                lost(r, fl[k].start);
                close(fl[k].fd);
                fl[k] = fl[--n];
            }
        }
        if (!sending && n == 0)
            break;
        if (sending && now >= next_ns && n < cap) {
            if (send_query(r, i, &fl[n]) == 0)
                n++;
            i++;
            next_ns += r->interval_ns;
            if (next_ns < now)
                next_ns = now + r->interval_ns;
            continue;
        }
        int64_t wake = sending && n < cap ? next_ns : INT64_MAX;
        for (size_t k = 0; k < n; k++) {
            pfds[k].fd = fl[k].fd;
            pfds[k].events = POLLIN;
            pfds[k].revents = 0;
            if (fl[k].start + r->timeout_ns < wake)
                wake = fl[k].start + r->timeout_ns;
        }
        int64_t left = wake - now_ns();
        if (left < 0)
            left = 0;
        struct timespec ts = {.tv_sec = left / 1000000000, .tv_nsec = left % 1000000000};
        int ready = ppoll(pfds, n, &ts, NULL);
        if (ready < 0 && errno != EINTR)
            die("poll failed");
        for (size_t k = n; ready > 0 && k-- > 0;) {
            if (pfds[k].revents == 0)
                continue;
            int rcode = reply_rcode(r, &fl[k]);
            if (rcode == -1)
                continue;
            if (rcode == -2)
                lost(r, fl[k].start);
            else
                answered(r, &fl[k], rcode);
            close(fl[k].fd);
            fl[k] = fl[--n]; /* the one moved here was polled at n-1 and handled already */
        }
    }
    free(pfds);
    free(fl);
}

static int run_prober(int argc, char **argv)
{
    long count = 1000, timeout_ms = 1000;
    double limit_s = 0;
    long interval_us = 0;
    int open_loop = 0;
    const char *out_path = NULL;
    int dnssec_ok = 0;
    int record = 0;
    enum transport transport = T_UDP;
    int opt;
    while ((opt = getopt(argc, argv, "n:l:i:Ot:o:DRm:")) != -1) {
        switch (opt) {
        case 'n': count = strtol(optarg, NULL, 10); break;
        case 'l': limit_s = strtod(optarg, NULL); break;
        case 'i': interval_us = strtol(optarg, NULL, 10); break;
        case 'O': open_loop = 1; break;
        case 't': timeout_ms = strtol(optarg, NULL, 10); break;
        case 'o': out_path = optarg; break;
        case 'D': dnssec_ok = 1; break;
        case 'R': record = 1; break;
        case 'm':
            if (strcmp(optarg, "udp") == 0)
                transport = T_UDP;
            else if (strcmp(optarg, "tcp") == 0)
                transport = T_TCP;
            else if (strcmp(optarg, "tcp-new") == 0)
                transport = T_TCP_NEW;
            else
                die("-m: udp, tcp or tcp-new");
            break;
        default: return 2;
        }
    }
    if (argc - optind != 3 || count <= 0 || timeout_ms <= 0 || limit_s < 0 || interval_us < 0 ||
        (open_loop && interval_us == 0))
        die("usage: prober [-n COUNT] [-l SECONDS] [-i INTERVAL_US [-O]] [-t TIMEOUT_MS] "
            "[-o FILE] [-D] [-R] [-m udp|tcp|tcp-new] ADDR PORT QUERYFILE");
    static struct run r;
    r.addr = argv[optind];
    r.port = argv[optind + 1];
    r.queries = read_queries(argv[optind + 2], &r.nqueries);
    for (size_t i = 0; dnssec_ok && i < r.nqueries; i++)
        add_dnssec_ok(&r.queries[i]);
    r.out = out_path ? fopen(out_path, "w") : stdout;
    if (r.out == NULL)
        die("cannot open the output file");
    r.record = record;
    r.transport = transport;
    r.count = count;
    r.timeout_ns = (int64_t)timeout_ms * 1000000;
    r.interval_ns = (int64_t)interval_us * 1000;
    r.end_ns = limit_s > 0 ? now_ns() + (int64_t)(limit_s * 1e9) : INT64_MAX;
    r.id = (uint16_t)(now_ns() & 0xffff);
    if (open_loop)
        run_open_loop(&r);
    else
        run_sequential(&r);
    if (fclose(r.out) != 0)
        die("cannot write the latencies");
    fprintf(stderr, "summary sent=%ld answered=%ld lost=%ld ports=%ld\n", r.sent, r.answered,
            r.sent - r.answered, r.ports);
    free(r.queries);
    return 0;
}

static _Noreturn void run_responder(const char *port_text)
{
    char *end;
    unsigned long port = strtoul(port_text, &end, 10);
    if (*end != '\0' || port > 65535)
        die("bad responder port");
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t sa_len = sizeof(sa);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sa_len) != 0)
        die("cannot bind the responder socket");
    printf("port %u\n", ntohs(sa.sin_port));
    fflush(stdout);
    unsigned char buf[MAX_DATAGRAM];
    for (;;) {
        struct sockaddr_storage from;
        socklen_t from_len = sizeof(from);
        ssize_t got = recvfrom(fd, buf, sizeof(buf), 0, (struct sockaddr *)&from, &from_len);
        if (got < HEADER_LEN)
            continue;
        buf[2] |= 0x80;
        sendto(fd, buf, (size_t)got, 0, (struct sockaddr *)&from, from_len);
    }
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--responder") == 0)
        run_responder(argv[2]);
    return run_prober(argc, argv);
}
