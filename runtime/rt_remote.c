/* The remote tier of the cache: entries shared by a fleet through a Redis server
 * (docs/CACHE.md, "The remote tier").
 *
 *   TILE_REMOTE_CACHE=redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]
 *                                                 the server (unset: no remote tier)
 *   TILE_REMOTE_CACHE_TIMEOUT_MS=200              connect and command timeout
 *
 * A Redis key is "tile:KEY.KIND" (KEY: the 32 hex digits of the local file name) and
 * its value is the whole entry image, header and payload, as a local file holds it;
 * rt_cache.c checks it exactly as it checks a file before using it.
 *
 * The tier is best effort: the first failure of any kind (no libhiredis, a bad URL,
 * a refused connection, a timeout, an error reply) prints one warning and turns the
 * tier off for the rest of the process. libhiredis is dlopened (as libcuda and
 * libtileCG are), so libtileRT has no dependency on it: a machine without it only
 * loses the remote tier. One connection per process, used under a mutex (hiredis
 * contexts are not thread-safe); a forked child opens its own. */
#define _DEFAULT_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "ir/arena.h"
#include "rt_internal.h"

#ifdef TILE_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

#define DEFAULT_PORT 6379
#define DEFAULT_TIMEOUT_MS 200

typedef enum RemoteState { REMOTE_UNREAD, REMOTE_ON, REMOTE_OFF } RemoteState;


static struct {
    pthread_mutex_t lock;
    RemoteState state;
    char url[512];             /* as given, the password masked, for messages */
    RtRemoteUrl where;
    int timeout_ms;
    pid_t pid;                 /* the process that opened conn */
    void *conn;                /* a redisContext, NULL until the first command */
    RtRemoteStats stats;
} R = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* The one warning of a process; the tier is off after it. Called under R.lock. */
static void give_up(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void give_up(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tile: warning: remote cache %s: ", R.url);
    vfprintf(stderr, fmt, ap);
    fputs("; continuing with the local cache only\n", stderr);
    va_end(ap);
    R.state = REMOTE_OFF;
}

/* ---- configuration ---------------------------------------------------------------- */
static bool parse_int(const char *s, size_t n, int lo, int hi, int *out)
{
    if (n == 0 || n > 9) return false;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return false;
        v = v * 10 + (s[i] - '0');
    }
    if (v < lo || v > hi) return false;
    *out = v;
    return true;
}

/* USER:PASSWORD or :PASSWORD, the n bytes before the '@' of a URL. */
static bool parse_userinfo(const char *s, size_t n, RtRemoteUrl *out)
{
    const char *colon = memchr(s, ':', n);
    if (!colon || colon == s + n - 1) return false;
    size_t un = (size_t)(colon - s), pn = n - un - 1;
    if (un >= sizeof out->user || pn >= sizeof out->password) return false;
    memcpy(out->user, s, un);
    out->user[un] = 0;
    memcpy(out->password, colon + 1, pn);
    out->password[pn] = 0;
    return true;
}

/* A name, an IPv4 address or [an IPv6 address] into out->host; returns what follows
 * it, or NULL. */
static const char *parse_host(const char *h, RtRemoteUrl *out)
{
    const char *end;
    if (*h == '[') {
        if (!(end = strchr(h, ']'))) return NULL;
        h++;
    } else {
        end = h + strcspn(h, ":/");
    }
    size_t hn = (size_t)(end - h);
    if (hn == 0 || hn >= sizeof out->host || memchr(h, '@', hn)) return NULL;
    memcpy(out->host, h, hn);
    return end + (*end == ']');
}

/* redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]. */
bool rt_remote_parse_url(const char *url, RtRemoteUrl *out)
{
    static const char scheme[] = "redis://";
    memset(out, 0, sizeof *out);
    if (strncmp(url, scheme, sizeof scheme - 1)) return false;
    const char *h = url + sizeof scheme - 1;
    const char *at = memchr(h, '@', strcspn(h, "/"));
    if (at && !parse_userinfo(h, (size_t)(at - h), out)) return false;
    const char *p = parse_host(at ? at + 1 : h, out);
    if (!p) return false;
    out->port = DEFAULT_PORT;
    if (*p == ':') {
        size_t n = strcspn(p + 1, "/");
        if (!parse_int(p + 1, n, 1, 65535, &out->port)) return false;
        p += 1 + n;
    }
    if (*p == '/' && p[1] && !parse_int(p + 1, strlen(p + 1), 0, 1 << 20, &out->db)) return false;
    return *p == 0 || *p == '/';
}

/* The URL for messages: a password in it shown as ***. */
static void masked_url(const char *url, char *out, size_t n)
{
    const char *h = strstr(url, "://");
    h = h ? h + 3 : url;
    const char *at = memchr(h, '@', strcspn(h, "/"));
    const char *colon = at ? memchr(h, ':', (size_t)(at - h)) : NULL;
    if (colon) snprintf(out, n, "%.*s***%s", (int)(colon + 1 - url), url, at);
    else snprintf(out, n, "%s", url);
}

static int timeout_from_env(void)
{
    const char *v = getenv("TILE_REMOTE_CACHE_TIMEOUT_MS");
    int ms;
    if (!v || !*v) return DEFAULT_TIMEOUT_MS;
    if (parse_int(v, strlen(v), 1, 600000, &ms)) return ms;
    fprintf(stderr, "tile: warning: TILE_REMOTE_CACHE_TIMEOUT_MS='%s' is not a number of "
            "milliseconds (1 to 600000); using %d\n", v, DEFAULT_TIMEOUT_MS);
    return DEFAULT_TIMEOUT_MS;
}

/* Reads the environment once per process. Unset: off without a word (and no call into
 * hiredis). Called under R.lock. */
static void configure(void)
{
    const char *v = getenv("TILE_REMOTE_CACHE");
    R.state = REMOTE_OFF;
    if (!v || !*v) return;
    masked_url(v, R.url, sizeof R.url);
    if (!rt_remote_parse_url(v, &R.where)) {
        give_up("not a URL of the form redis://HOST:PORT, redis://HOST:PORT/DB or "
                "redis://[USER]:PASSWORD@HOST:PORT[/DB]");
        return;
    }
    R.timeout_ms = timeout_from_env();
    R.state = REMOTE_ON;
}

#ifdef TILE_HAVE_HIREDIS
/* ---- libhiredis, dlopened ----------------------------------------------------------- */
/* The entry points, typed by the header the runtime was built with, so a call through
 * the table is checked by the compiler. */
#define RT_HIREDIS_FNS(X) \
    X(redisConnectWithTimeout) X(redisSetTimeout) X(redisCommandArgv) X(freeReplyObject) \
    X(redisFree)

typedef struct Hiredis {
#define X(name) __typeof__(name) *name;
    RT_HIREDIS_FNS(X)
#undef X
} Hiredis;

static Hiredis H;
static bool H_loaded;

/* The library the runtime was built against (its SONAME: the structures' layout
 * changed between hiredis 0.14 and 1.0), or $TILE_HIREDIS_LIBRARY. */
static bool load_hiredis(void)
{
    if (H_loaded) return true;
    const char *lib = getenv("TILE_HIREDIS_LIBRARY");
    if (!lib || !*lib) lib = RT_HIREDIS_SONAME;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        give_up("cannot load %s (%s)", lib, dlerror());
        return false;
    }
#define X(name)                                                                  \
    if (!(H.name = (__typeof__(H.name))dlsym(h, #name))) {                       \
        give_up("%s has no %s", lib, #name);                                     \
        return false;                                                            \
    }
    RT_HIREDIS_FNS(X)
#undef X
    return H_loaded = true;
}

static struct timeval timeout_tv(void)
{
    return (struct timeval){R.timeout_ms / 1000, (R.timeout_ms % 1000) * 1000};
}

/* Why the context failed, in words: hiredis reports a timeout as EAGAIN's text. */
static void give_up_conn(redisContext *c, const char *what)
{
    const char *why = c && c->errstr[0] ? c->errstr : "no reply";
    if (c && c->err == REDIS_ERR_IO && (strstr(why, "temporarily unavailable") ||
                                        strstr(why, "timed out")))
        give_up("%s: no answer within %d ms (TILE_REMOTE_CACHE_TIMEOUT_MS)", what, R.timeout_ms);
    else if (c && c->err == REDIS_ERR_EOF)
        give_up("%s: the server closed the connection", what);
    else
        give_up("%s: %s", what, why);
}

static void disconnect(void)
{
    if (R.conn) H.redisFree(R.conn);
    R.conn = NULL;
}

/* hiredis writes with write(2): a write to a server that died raises SIGPIPE, which
 * would kill the process. The signal is blocked in this thread around the command, and
 * one it raised is taken before the mask is restored. */
static redisReply *command_nopipe(int argc, const char **argv, const size_t *lens)
{
    sigset_t pipe_set, old, pending;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    redisReply *r = H.redisCommandArgv(R.conn, argc, argv, lens);
    if (!r && !sigismember(&old, SIGPIPE) && sigpending(&pending) == 0 &&
        sigismember(&pending, SIGPIPE))
        sigtimedwait(&pipe_set, NULL, &(struct timespec){0, 0});
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}

/* Sends one command; NULL (and the tier off) on any failure or error reply. */
static redisReply *command(int argc, const char **argv, const size_t *lens, const char *what)
{
    redisReply *r = command_nopipe(argc, argv, lens);
    if (!r) {
        give_up_conn(R.conn, what);
        disconnect();
        return NULL;
    }
    if (r->type == REDIS_REPLY_ERROR) {
        give_up("%s: the server answered: %.*s", what, (int)r->len, r->str);
        H.freeReplyObject(r);
        disconnect();
        return NULL;
    }
    return r;
}

/* AUTH [USER] PASSWORD: Redis 6's ACL users, or the requirepass of older servers. */
static bool authenticate(void)
{
    const RtRemoteUrl *w = &R.where;
    const char *argv[] = {"AUTH", w->user, w->password};
    size_t lens[] = {4, strlen(w->user), strlen(w->password)};
    if (!w->user[0]) argv[1] = w->password, lens[1] = lens[2];
    redisReply *r = command(w->user[0] ? 3 : 2, argv, lens, "AUTH");
    if (r) H.freeReplyObject(r);
    return r != NULL;
}

static bool select_db(void)
{
    char n[16];
    snprintf(n, sizeof n, "%d", R.where.db);
    const char *argv[] = {"SELECT", n};
    size_t lens[] = {6, strlen(n)};
    redisReply *r = command(2, argv, lens, "SELECT");
    if (r) H.freeReplyObject(r);
    return r != NULL;
}

/* The connection, opened on first use (and again in a forked child, whose parent's
 * socket is not its own to talk on). Called under R.lock with the tier on. */
static bool connected(void)
{
    if (R.conn && R.pid == getpid()) return true;
    if (R.conn) disconnect();   /* the child's copy of the parent's socket */
    if (!load_hiredis()) return false;
    redisContext *c = H.redisConnectWithTimeout(R.where.host, R.where.port, timeout_tv());
    if (!c || c->err) {
        give_up_conn(c, "cannot connect");
        if (c) H.redisFree(c);
        return false;
    }
    if (H.redisSetTimeout(c, timeout_tv()) != 0) {
        give_up_conn(c, "cannot set a timeout");
        H.redisFree(c);
        return false;
    }
    R.conn = c;
    R.pid = getpid();
    return (!R.where.password[0] || authenticate()) && (R.where.db == 0 || select_db());
}

static void redis_key(RtEntryKind kind, const RtKey *key, char out[48])
{
    char hex[33];
    rt_key_hex(key, hex);
    snprintf(out, 48, "tile:%s.%s", hex, rt_entry_kind_name(kind));
}

static RtGet get_locked(RtEntryKind kind, const RtKey *key, size_t max, RtBlob *image)
{
    char k[48];
    redis_key(kind, key, k);
    const char *argv[] = {"GET", k};
    size_t lens[] = {3, strlen(k)};
    redisReply *r = command(2, argv, lens, "GET");
    if (!r) return RT_GET_MISS;
    RtGet g = RT_GET_MISS;
    if (r->type == REDIS_REPLY_STRING && r->len > max) {
        g = RT_GET_BAD;   /* larger than any entry: not even copied */
    } else if (r->type == REDIS_REPLY_STRING) {
        if ((image->data = tl_malloc(r->len + 1))) {
            memcpy(image->data, r->str, r->len);
            image->len = r->len;
            g = RT_GET_HIT;
        }
    } else if (r->type != REDIS_REPLY_NIL) {
        give_up("GET: an unexpected reply (type %d)", r->type);
        disconnect();
    }
    H.freeReplyObject(r);
    return g;
}

static void put_locked(RtEntryKind kind, const RtKey *key, const void *image, size_t n)
{
    char k[48];
    redis_key(kind, key, k);
    const char *argv[] = {"SET", k, image};
    size_t lens[] = {3, strlen(k), n};
    redisReply *r = command(3, argv, lens, "SET");
    if (r) H.freeReplyObject(r);
    if (r) R.stats.puts++;
}
#else
static bool connected(void)
{
    give_up("this libtileRT was built without hiredis (libhiredis-dev), so without the "
            "remote tier");
    return false;
}

static RtGet get_locked(RtEntryKind kind, const RtKey *key, size_t max, RtBlob *image)
{
    (void)kind, (void)key, (void)max, (void)image;
    return RT_GET_MISS;
}

static void put_locked(RtEntryKind kind, const RtKey *key, const void *image, size_t n)
{
    (void)kind, (void)key, (void)image, (void)n;
}
#endif

/* ---- the tier's two operations ------------------------------------------------------ */
/* Takes the lock; true with it held when the tier is on and connected. */
static bool enter(void)
{
    pthread_mutex_lock(&R.lock);
    if (R.state == REMOTE_UNREAD) configure();
    if (R.state == REMOTE_ON && connected()) return true;
    pthread_mutex_unlock(&R.lock);
    return false;
}

RtGet rt_remote_get(RtEntryKind kind, const RtKey *key, size_t max, RtBlob *image)
{
    image->data = NULL;
    image->len = 0;
    if (!enter()) return RT_GET_MISS;
    RtGet g = get_locked(kind, key, max, image);
    if (g == RT_GET_HIT) R.stats.hits++;
    else if (g == RT_GET_MISS && R.state == REMOTE_ON) R.stats.misses++;
    pthread_mutex_unlock(&R.lock);
    return g;
}

void rt_remote_put(RtEntryKind kind, const RtKey *key, const void *image, size_t n)
{
    if (!enter()) return;
    put_locked(kind, key, image, n);
    pthread_mutex_unlock(&R.lock);
}

void rt_remote_refused(RtEntryKind kind, const RtKey *key, const char *why)
{
    char hex[33];
    rt_key_hex(key, hex);
    pthread_mutex_lock(&R.lock);
    R.stats.refused++;
    fprintf(stderr, "tile: warning: remote cache %s: entry %s.%s refused (%s); building it "
            "here\n", R.url, hex, rt_entry_kind_name(kind), why);
    pthread_mutex_unlock(&R.lock);
}

RtRemoteStats rt_remote_stats(void)
{
    pthread_mutex_lock(&R.lock);
    RtRemoteStats s = R.stats;
    s.on = R.state == REMOTE_ON;
    pthread_mutex_unlock(&R.lock);
    return s;
}
