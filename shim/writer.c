/* writer.c - the one writer thread: owns the SQLite connection and its
 * prepared statements, drains the ring in batched transactions (commit
 * after TPA_BATCH records, TPA_BATCH_NS, an empty ring or a flush request),
 * checks every return code and turns the shim off on any failure.  Ends a
 * database within a bounded time (exit, _exit, exec).  The database and
 * the thread start on the process's first record. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "shim_core.h"

#define TPA_BATCH 8192
#define TPA_BATCH_NS 5000000LL

_Atomic int tpa_state;

enum { ST_AUDIT_BEGIN, ST_AUDIT_END, ST_TENSOR, ST_REF, ST_EVENT, ST_STACK, ST_MODULE,
       ST_MODULE_UNLOAD, ST_ALLOC, ST_API_CALL, ST_RUN, ST_BEGIN, ST_COMMIT, ST_COUNT };

static const char *const g_sql[ST_COUNT] = {
    "INSERT OR REPLACE INTO audit(id,label,step,begin_ns,rank,world_size) VALUES(?,?,?,?,?,?)",
    "UPDATE audit SET end_ns=? WHERE id=?",
    "INSERT OR REPLACE INTO tensor(audit_id,key,name,shape,local_shape,dtype,device,storage_ptr,"
    "storage_bytes,nbytes,requires_grad,has_grad,type) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO ref(audit_id,holder_kind,holder_class,holder_id,path,role,tensor_key,peer_key) "
    "VALUES(?,?,?,?,?,?,?,?)",
    "INSERT INTO event(ts_ns,kind,name,holder_class,holder_id,old_key,new_key,detail,py_stack,stack_id) "
    "VALUES(?,?,?,?,?,?,?,?,?,?)",
    "INSERT INTO stack(id,hash,depth,ips) VALUES(?,?,?,?)",
    "INSERT INTO module(id,path,base,low,high,build_id,load_ns) VALUES(?,?,?,?,?,?,?)",
    "UPDATE module SET unload_ns=? WHERE id=?",
    "INSERT INTO alloc(ts_ns,op,address,bytes,memkind,device,context,stream,pool,source,correlation,"
    "label,stack_id) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?)",
    "INSERT OR REPLACE INTO api_call(correlation,ts_ns,api,thread,stack_id) VALUES(?,?,?,?,?)",
    "UPDATE run SET rank=?,world_size=?,local_rank=?,dropped_events=?,truncated_strings=?,cupti=?,"
    "cupti_dropped=?,python=?,note=?,end_ns=?,exit_status=?,complete=?,ended_by=? WHERE id=1",
    "BEGIN",
    "COMMIT",
};

static const char g_schema[] =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "BEGIN;"
    "CREATE TABLE run(id INTEGER PRIMARY KEY CHECK (id = 1), tool_version TEXT NOT NULL, host TEXT NOT NULL,"
    " pid INTEGER NOT NULL, ppid INTEGER NOT NULL, argv TEXT NOT NULL, exe TEXT, start_ns INTEGER NOT NULL,"
    " start_unix_ns INTEGER NOT NULL, end_ns INTEGER, exit_status INTEGER, complete INTEGER NOT NULL DEFAULT 0,"
    " rank INTEGER, world_size INTEGER, local_rank INTEGER, dropped_events INTEGER NOT NULL DEFAULT 0,"
    " truncated_strings INTEGER NOT NULL DEFAULT 0, cupti TEXT NOT NULL DEFAULT 'off: not started',"
    " cupti_dropped INTEGER NOT NULL DEFAULT 0, python TEXT NOT NULL DEFAULT 'n/a', note TEXT, ended_by TEXT);"
    "CREATE TABLE audit(id INTEGER PRIMARY KEY, label TEXT NOT NULL, step INTEGER NOT NULL,"
    " begin_ns INTEGER NOT NULL, end_ns INTEGER, rank INTEGER, world_size INTEGER);"
    "CREATE TABLE tensor(audit_id INTEGER NOT NULL, key INTEGER NOT NULL, name TEXT, shape TEXT NOT NULL,"
    " local_shape TEXT NOT NULL, dtype TEXT, device TEXT, storage_ptr INTEGER NOT NULL,"
    " storage_bytes INTEGER NOT NULL, nbytes INTEGER NOT NULL, requires_grad INTEGER NOT NULL,"
    " has_grad INTEGER NOT NULL, type TEXT, PRIMARY KEY (audit_id, key));"
    "CREATE TABLE ref(audit_id INTEGER NOT NULL, holder_kind TEXT NOT NULL, holder_class TEXT,"
    " holder_id INTEGER NOT NULL, path TEXT, role TEXT NOT NULL, tensor_key INTEGER NOT NULL,"
    " peer_key INTEGER NOT NULL DEFAULT 0);"
    "CREATE INDEX ref_by_audit ON ref(audit_id, role, tensor_key);"
    "CREATE TABLE event(id INTEGER PRIMARY KEY, ts_ns INTEGER NOT NULL, kind TEXT NOT NULL, name TEXT,"
    " holder_class TEXT, holder_id INTEGER, old_key INTEGER, new_key INTEGER, detail TEXT, py_stack TEXT,"
    " stack_id INTEGER);"
    "CREATE TABLE stack(id INTEGER PRIMARY KEY, hash INTEGER NOT NULL, depth INTEGER NOT NULL, ips BLOB NOT NULL);"
    "CREATE TABLE module(id INTEGER PRIMARY KEY, path TEXT NOT NULL, base INTEGER NOT NULL, low INTEGER NOT NULL,"
    " high INTEGER NOT NULL, build_id TEXT, load_ns INTEGER NOT NULL, unload_ns INTEGER);"
    "CREATE TABLE alloc(id INTEGER PRIMARY KEY, ts_ns INTEGER NOT NULL, op TEXT NOT NULL, address INTEGER NOT NULL,"
    " bytes INTEGER NOT NULL, memkind TEXT NOT NULL, device INTEGER, context INTEGER, stream INTEGER,"
    " pool INTEGER, source TEXT NOT NULL, correlation INTEGER, label TEXT, stack_id INTEGER);"
    "CREATE INDEX alloc_by_address ON alloc(address);"
    "CREATE TABLE api_call(correlation INTEGER PRIMARY KEY, ts_ns INTEGER NOT NULL, api TEXT NOT NULL,"
    " thread INTEGER, stack_id INTEGER);"
    "PRAGMA user_version=1;"
    "COMMIT;";

static sqlite3 *g_db;
static sqlite3_stmt *g_st[ST_COUNT];
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;     /* flush waiters */
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static pthread_mutex_t g_start_mu = PTHREAD_MUTEX_INITIALIZER; /* starting the writer */
static _Atomic uint64_t g_flush_req, g_committed;
static _Atomic int g_stop, g_thread_live, g_ready;
/* Set while SQLite changes its process-wide lists (open, close): a fork
 * child that sees it set never uses SQLite. */
static _Atomic int g_sqlite_global_busy;
static _Atomic int64_t g_drain_deadline;
static _Atomic int g_discard_if_empty, g_removed, g_reopen;
static int g_final_has_status, g_final_status;
static const char *g_ended_by;
static _Atomic unsigned g_run_gen_written;
static unsigned char g_buf[TPA_REC_MAX] __attribute__((aligned(16)));
static char g_path[4200];

int tpa_writer_has_db(void) { return atomic_load(&g_ready); }

void tpa_disable(const char *why) {
    int expect = TPA_RUNNING;
    if (atomic_compare_exchange_strong(&tpa_state, &expect, TPA_DISABLED))
        tpa_log(TPA_LOG_WARN, "disabled: %s; the host continues without auditing", why);
    tpa_run_mark_incomplete();
}

static int fail(const char *what) {
    char why[4800];
    if (tpa_dbfd_lost())
        snprintf(why, sizeof why, "%s: its file descriptor was closed or replaced by the host (%s)", what,
                 g_path);
    else
        snprintf(why, sizeof why, "%s: %s (%s)", what, g_db ? sqlite3_errmsg(g_db) : "no database", g_path);
    tpa_disable(why);
    return -1;
}

static int step_done(sqlite3_stmt *st) {
    /* a transaction starts only while every descriptor is still ours: a lost
     * one fails at once instead of in SQLite's lock retries */
    if (st == g_st[ST_BEGIN] && tpa_dbfd_check() != 0) return -1;
    int rc = sqlite3_step(st);
    sqlite3_reset(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

static void bind_str(sqlite3_stmt *st, int i, const struct tpa_rec_view *v, int s) {
    if (v->str[s])
        sqlite3_bind_text(st, i, v->str[s], v->slen[s], SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

static void bind_key_or_null(sqlite3_stmt *st, int i, uint64_t k) {
    if (k)
        sqlite3_bind_int64(st, i, (int64_t)k);
    else
        sqlite3_bind_null(st, i);
}

static void bind_opt(sqlite3_stmt *st, int i, int64_t x) {
    if (x >= 0)
        sqlite3_bind_int64(st, i, x);
    else
        sqlite3_bind_null(st, i);
}

static void shape_json(char *out, size_t cap, const int64_t *dims, int n) {
    size_t k = (size_t)snprintf(out, cap, "[");
    for (int i = 0; i < n && k < cap; i++)
        k += (size_t)snprintf(out + k, cap - k, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (k < cap) snprintf(out + k, cap - k, "]");
}

static const char *holder_text(int k) {
    return k == TPAUDIT_HOLDER_MODULE ? "module" : k == TPAUDIT_HOLDER_OPTIMIZER ? "optimizer" : "wrapper";
}
static const char *role_text(int r) {
    return r == TPAUDIT_ROLE_PARAM ? "param" : r == TPAUDIT_ROLE_GROUP_PARAM ? "group_param"
         : r == TPAUDIT_ROLE_STATE ? "state" : "map_entry";
}
static const char *event_text(int k) {
    return k == TPAUDIT_EVENT_OPTIMIZER_CREATED ? "optimizer_created"
         : k == TPAUDIT_EVENT_PARAM_CREATED ? "param_created"
         : k == TPAUDIT_EVENT_PARAM_REPLACED ? "param_replaced" : "module_replaced";
}
static const char *memkind_text(int m) {
    static const char *const t[] = {"device", "device", "pinned", "managed", "pool", "vmm", "region"};
    return (m >= 1 && m <= 6) ? t[m] : "device";
}

static int handle(const struct tpa_rec_view *v) {
    sqlite3_stmt *st;
    int err = 0;
    int64_t stack_id = 0;
    if (v->nips > 0) {
        stack_id = tpa_stack_intern(g_st[ST_STACK], v->ips, v->nips, &err);
        if (err) return -1;
    }
    switch (v->type) {
    case TPA_REC_AUDIT_BEGIN: {
        struct tpa_fx_audit_begin f;
        memcpy(&f, v->fixed, sizeof f);
        st = g_st[ST_AUDIT_BEGIN];
        sqlite3_bind_int64(st, 1, f.id);
        bind_str(st, 2, v, 0);
        if (!v->str[0]) sqlite3_bind_text(st, 2, "", 0, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, f.step);
        sqlite3_bind_int64(st, 4, f.ts);
        bind_opt(st, 5, f.rank);
        bind_opt(st, 6, f.world);
        return step_done(st);
    }
    case TPA_REC_AUDIT_END: {
        struct tpa_fx_audit_end f;
        memcpy(&f, v->fixed, sizeof f);
        st = g_st[ST_AUDIT_END];
        sqlite3_bind_int64(st, 1, f.ts);
        sqlite3_bind_int64(st, 2, f.id);
        return step_done(st);
    }
    case TPA_REC_TENSOR: {
        struct tpa_fx_tensor f;
        memcpy(&f, v->fixed, sizeof f);
        char shape[256], local[256];
        shape_json(shape, sizeof shape, f.shape, f.ndim);
        if (f.local_ndim >= 0)
            shape_json(local, sizeof local, f.local_shape, f.local_ndim);
        else
            memcpy(local, shape, sizeof shape);
        st = g_st[ST_TENSOR];
        sqlite3_bind_int64(st, 1, f.audit_id);
        sqlite3_bind_int64(st, 2, (int64_t)f.key);
        bind_str(st, 3, v, 0);
        sqlite3_bind_text(st, 4, shape, -1, SQLITE_TRANSIENT);
        sqlite3_bind_text(st, 5, local, -1, SQLITE_TRANSIENT);
        bind_str(st, 6, v, 1);
        bind_str(st, 7, v, 2);
        sqlite3_bind_int64(st, 8, (int64_t)f.storage_ptr);
        sqlite3_bind_int64(st, 9, (int64_t)f.storage_bytes);
        sqlite3_bind_int64(st, 10, (int64_t)f.nbytes);
        sqlite3_bind_int(st, 11, f.requires_grad != 0);
        sqlite3_bind_int(st, 12, f.has_grad != 0);
        bind_str(st, 13, v, 3);
        return step_done(st);
    }
    case TPA_REC_REF: {
        struct tpa_fx_ref f;
        memcpy(&f, v->fixed, sizeof f);
        st = g_st[ST_REF];
        sqlite3_bind_int64(st, 1, f.audit_id);
        sqlite3_bind_text(st, 2, holder_text(f.holder_kind), -1, SQLITE_STATIC);
        bind_str(st, 3, v, 0);
        sqlite3_bind_int64(st, 4, (int64_t)f.holder_id);
        bind_str(st, 5, v, 1);
        sqlite3_bind_text(st, 6, role_text(f.role), -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 7, (int64_t)f.tensor_key);
        sqlite3_bind_int64(st, 8, (int64_t)f.peer_key);
        return step_done(st);
    }
    case TPA_REC_EVENT: {
        struct tpa_fx_event f;
        memcpy(&f, v->fixed, sizeof f);
        st = g_st[ST_EVENT];
        sqlite3_bind_int64(st, 1, f.ts);
        sqlite3_bind_text(st, 2, event_text(f.kind), -1, SQLITE_STATIC);
        bind_str(st, 3, v, 0);
        bind_str(st, 4, v, 1);
        bind_key_or_null(st, 5, f.holder_id);
        bind_key_or_null(st, 6, f.old_key);
        bind_key_or_null(st, 7, f.new_key);
        bind_str(st, 8, v, 2);
        bind_str(st, 9, v, 3);
        bind_key_or_null(st, 10, (uint64_t)stack_id);
        return step_done(st);
    }
    case TPA_REC_ALLOC: {
        struct tpa_fx_alloc f;
        memcpy(&f, v->fixed, sizeof f);
        st = g_st[ST_ALLOC];
        sqlite3_bind_int64(st, 1, f.ts);
        sqlite3_bind_text(st, 2, f.op == TPA_FREE ? "free" : "alloc", -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, (int64_t)f.address);
        sqlite3_bind_int64(st, 4, (int64_t)f.bytes);
        sqlite3_bind_text(st, 5, memkind_text(f.memkind), -1, SQLITE_STATIC);
        sqlite3_bind_int(st, 6, f.device);
        if (f.source) {
            sqlite3_bind_null(st, 7);
            sqlite3_bind_null(st, 8);
            sqlite3_bind_int64(st, 9, 0);
            sqlite3_bind_text(st, 10, "region", -1, SQLITE_STATIC);
            sqlite3_bind_null(st, 11);
        } else {
            sqlite3_bind_int64(st, 7, f.context);
            sqlite3_bind_int64(st, 8, f.stream);
            sqlite3_bind_int64(st, 9, (int64_t)f.pool);
            sqlite3_bind_text(st, 10, "cupti", -1, SQLITE_STATIC);
            sqlite3_bind_int64(st, 11, f.correlation);
        }
        bind_str(st, 12, v, 0);
        bind_key_or_null(st, 13, (uint64_t)stack_id);
        return step_done(st);
    }
    case TPA_REC_API_CALL: {
        struct tpa_fx_api_call f;
        memcpy(&f, v->fixed, sizeof f);
        st = g_st[ST_API_CALL];
        sqlite3_bind_int64(st, 1, f.correlation);
        sqlite3_bind_int64(st, 2, f.ts);
        bind_str(st, 3, v, 0);
        if (!v->str[0]) sqlite3_bind_text(st, 3, "?", 1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 4, f.thread);
        bind_key_or_null(st, 5, (uint64_t)stack_id);
        return step_done(st);
    }
    default:
        return 0;
    }
}

static int write_run(int final) {
    struct tpa_run_snapshot s;
    unsigned gen = tpa_run_generation();
    if (!final && gen == g_run_gen_written) return 0;
    tpa_run_snapshot(&s);
    sqlite3_stmt *st = g_st[ST_RUN];
    bind_opt(st, 1, s.rank);
    bind_opt(st, 2, s.world_size);
    bind_opt(st, 3, s.local_rank);
    sqlite3_bind_int64(st, 4, (int64_t)s.dropped);
    sqlite3_bind_int64(st, 5, (int64_t)s.truncated);
    sqlite3_bind_text(st, 6, s.cupti, -1, SQLITE_TRANSIENT);
    sqlite3_bind_int64(st, 7, (int64_t)s.cupti_dropped);
    sqlite3_bind_text(st, 8, s.python, -1, SQLITE_TRANSIENT);
    if (s.note[0])
        sqlite3_bind_text(st, 9, s.note, -1, SQLITE_TRANSIENT);
    else
        sqlite3_bind_null(st, 9);
    if (final) {
        sqlite3_bind_int64(st, 10, tpa_now_ns());
        if (g_final_has_status)
            sqlite3_bind_int(st, 11, g_final_status);
        else
            sqlite3_bind_null(st, 11);
        sqlite3_bind_int(st, 12, !tpa_run_is_incomplete());
        sqlite3_bind_text(st, 13, g_ended_by, -1, SQLITE_STATIC);
    } else {
        sqlite3_bind_null(st, 10);
        sqlite3_bind_null(st, 11);
        sqlite3_bind_int(st, 12, 0);
        sqlite3_bind_null(st, 13);
    }
    if (step_done(st) != 0) return -1;
    g_run_gen_written = gen;
    return 0;
}

static void close_db(void) {
    for (int i = 0; i < ST_COUNT; i++) {
        if (g_st[i]) sqlite3_finalize(g_st[i]);
        g_st[i] = NULL;
    }
    atomic_store(&g_sqlite_global_busy, 1);
    if (g_db) sqlite3_close(g_db);
    atomic_store(&g_sqlite_global_busy, 0);
    g_db = NULL;
}

/* Removes the database and the files beside it, each only if it is still
 * the very file this process created (never a planted link or a file put
 * there since). */
static void remove_files(void) {
    static const char *const suffix[] = {"", "-wal", "-shm", "-journal"};
    for (int i = 0; i < 4 && g_path[0]; i++) {
        char p[4300];
        uint64_t dev, ino;
        snprintf(p, sizeof p, "%s%s", g_path, suffix[i]);
        if (tpa_dbfd_identity(p, &dev, &ino) == 0 && tpa_dbfd_created(dev, ino)) unlink(p);
    }
}

static void sanitize_host(char *h) {
    for (char *p = h; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '-' || *p == '_'))
            *p = '_';
}

static int mkdir_p(const char *dir) {
    char tmp[4200];
    snprintf(tmp, sizeof tmp, "%s", dir);
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    if (mkdir(tmp, 0777) != 0 && errno != EEXIST) return -1;
    struct stat sb;
    return (stat(tmp, &sb) == 0 && S_ISDIR(sb.st_mode)) ? 0 : -1;
}

static int json_argv(char *out, size_t cap) {
    char cmd[16384];
    int n = tpa_read_cmdline(cmd, sizeof cmd);
    size_t k = 0;
    out[k++] = '[';
    int first = 1;
    for (int i = 0; i < n;) {
        const char *a = cmd + i;
        size_t len = strlen(a);
        if (k + 8 >= cap) break;
        if (!first) out[k++] = ',';
        first = 0;
        out[k++] = '"';
        for (size_t j = 0; j < len && k + 8 < cap; j++) {
            unsigned char c = (unsigned char)a[j];
            if (c == '"' || c == '\\') {
                out[k++] = '\\';
                out[k++] = (char)c;
            } else if (c < 0x20) {
                k += (size_t)snprintf(out + k, cap - k, "\\u%04x", c);
            } else {
                out[k++] = (char)c;
            }
        }
        out[k++] = '"';
        i += (int)len + 1;
    }
    out[k++] = ']';
    out[k] = 0;
    return 0;
}

static int insert_run_row(void) {
    char host[256] = "unknown", exe[4096] = "", argv[20000];
    gethostname(host, sizeof host - 1);
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    json_argv(argv, sizeof argv);
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(g_db,
                           "INSERT INTO run(id,tool_version,host,pid,ppid,argv,exe,start_ns,start_unix_ns)"
                           " VALUES(1,?,?,?,?,?,?,?,?)", -1, &st, NULL) != SQLITE_OK)
        return -1;
    sqlite3_bind_text(st, 1, TPA_TOOL_VERSION, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, host, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, getpid());
    sqlite3_bind_int64(st, 4, getppid());
    sqlite3_bind_text(st, 5, argv, -1, SQLITE_STATIC);
    if (exe[0])
        sqlite3_bind_text(st, 6, exe, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, 6);
    sqlite3_bind_int64(st, 7, tpa_now_ns());
    sqlite3_bind_int64(st, 8, (int64_t)wall.tv_sec * 1000000000LL + wall.tv_nsec);
    int rc = sqlite3_step(st);
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? 0 : -1;
}

/* Creates the file (never overwrites, never follows a symlink) and the
 * schema; on any failure removes what it made. */
static int open_db(void) {
    const struct tpa_config *c = tpa_config();
    if (tpa_dbfd_floor() < 0) {
        tpa_disable("RLIMIT_NOFILE is below " "64, too low to keep a database open beside the host's files");
        return -1;
    }
    if (tpa_dbfd_install() != 0) {
        tpa_disable("cannot set up the shim's SQLite");
        return -1;
    }
    if (mkdir_p(c->out_dir) != 0) {
        char why[4300];
        snprintf(why, sizeof why, "cannot create output directory %s: %s", c->out_dir, strerror(errno));
        tpa_disable(why);
        return -1;
    }
    char host[256] = "unknown";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = 0;
    sanitize_host(host);
    int fd = -1;
    for (int i = 0; i < 1000 && fd < 0; i++) {
        if (i == 0)
            snprintf(g_path, sizeof g_path, "%s/tpaudit-%s-%d.db", c->out_dir, host, (int)getpid());
        else
            snprintf(g_path, sizeof g_path, "%s/tpaudit-%s-%d-%d.db", c->out_dir, host, (int)getpid(), i);
        fd = open(g_path, O_CREAT | O_EXCL | O_NOFOLLOW | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0 && errno != EEXIST) break;
    }
    if (fd < 0) {
        char why[4400];
        snprintf(why, sizeof why, "cannot create %s: %s", g_path, strerror(errno));
        g_path[0] = 0;
        tpa_disable(why);
        return -1;
    }
    struct stat sb;
    if (fstat(fd, &sb) == 0) tpa_dbfd_note_created((uint64_t)sb.st_dev, (uint64_t)sb.st_ino);
    close(fd);
    atomic_store(&g_sqlite_global_busy, 1);
    int rc = sqlite3_open_v2(g_path, &g_db, SQLITE_OPEN_READWRITE, NULL);
    atomic_store(&g_sqlite_global_busy, 0);
    if (rc != SQLITE_OK) return fail("cannot open database");
    char *err = NULL;
    if (sqlite3_exec(g_db, g_schema, NULL, NULL, &err) != SQLITE_OK) {
        sqlite3_free(err);
        return fail("cannot create schema");
    }
    if (insert_run_row() != 0) return fail("cannot write run row");
    for (int i = 0; i < ST_COUNT; i++)
        if (sqlite3_prepare_v2(g_db, g_sql[i], -1, &g_st[i], NULL) != SQLITE_OK)
            return fail("cannot prepare statement");
    if (step_done(g_st[ST_BEGIN]) || tpa_modules_refresh(g_st[ST_MODULE], g_st[ST_MODULE_UNLOAD], 1) ||
        write_run(0) || step_done(g_st[ST_COMMIT]))
        return fail("cannot write module table");
    tpa_log(TPA_LOG_INFO, "writing %s", g_path);
    return 0;
}

/* After a failed exec: the same file again, its end undone. */
static int reopen_db(void) {
    uint64_t dev, ino;
    if (tpa_dbfd_identity(g_path, &dev, &ino) != 0 || !tpa_dbfd_created(dev, ino)) {
        tpa_disable("the database is gone after a failed exec");
        return -1;
    }
    atomic_store(&g_sqlite_global_busy, 1);
    int rc = sqlite3_open_v2(g_path, &g_db, SQLITE_OPEN_READWRITE, NULL);
    atomic_store(&g_sqlite_global_busy, 0);
    if (rc != SQLITE_OK) return fail("cannot reopen database");
    for (int i = 0; i < ST_COUNT; i++)
        if (sqlite3_prepare_v2(g_db, g_sql[i], -1, &g_st[i], NULL) != SQLITE_OK)
            return fail("cannot prepare statement");
    g_run_gen_written = 0;
    if (step_done(g_st[ST_BEGIN]) || write_run(0) || step_done(g_st[ST_COMMIT]))
        return fail("cannot reopen the run row");
    return 0;
}

static void wake_waiters(void) {
    pthread_mutex_lock(&g_mu);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

static void drain_discarding(void) {
    struct tpa_rec_view v;
    while (tpa_ring_pop(g_buf, &v)) {
    }
}

/* At the end's deadline: what is left is dropped and counted. */
static void drop_rest_counting(void) {
    struct tpa_rec_view v;
    while (tpa_ring_pop(g_buf, &v)) tpa_run_count_dropped();
    if (tpa_ring_tail() < tpa_ring_head()) tpa_run_count_dropped(); /* reserved, never published */
}

static int stopping_and_empty(void) {
    return atomic_load(&g_stop) && tpa_ring_tail() >= tpa_ring_head();
}

static int past_deadline(void) {
    return atomic_load(&g_stop) && tpa_now_ns() >= atomic_load(&g_drain_deadline);
}

static void *writer_main(void *arg) {
    (void)arg;
    int in_txn = 0, n = 0, ok = 1;
    int64_t txn_start = 0;
    struct tpa_rec_view v;
    for (;;) {
        if (atomic_load(&tpa_state) == TPA_DISABLED) {
            ok = 0;
            break;
        }
        if (past_deadline()) break;
        if (!in_txn && stopping_and_empty()) break;
        if (!in_txn && tpa_modules_refresh(g_st[ST_MODULE], g_st[ST_MODULE_UNLOAD], 0) != 0) {
            ok = fail("cannot update module table") == 0;
            break;
        }
        int got = tpa_ring_pop(g_buf, &v);
        if (got) {
            if (!in_txn) {
                if (step_done(g_st[ST_BEGIN]) != 0) {
                    ok = fail("cannot begin transaction") == 0;
                    break;
                }
                in_txn = 1;
                n = 0;
                txn_start = tpa_now_ns();
            }
            if (handle(&v) != 0) {
                ok = fail("cannot insert record") == 0;
                break;
            }
            n++;
        }
        uint64_t tail = tpa_ring_tail();
        int flush_wanted = atomic_load(&g_flush_req) > atomic_load(&g_committed) &&
                           atomic_load(&g_flush_req) <= tail;
        if (in_txn && (!got || n >= TPA_BATCH || flush_wanted ||
                       ((n & 255) == 0 && tpa_now_ns() - txn_start >= TPA_BATCH_NS))) {
            if (write_run(0) != 0 || step_done(g_st[ST_COMMIT]) != 0) {
                ok = fail("cannot commit (disk full?)") == 0;
                break;
            }
            in_txn = 0;
            atomic_store(&g_committed, tail);
            wake_waiters();
        }
        if (!got && !in_txn && tpa_run_generation() != atomic_load(&g_run_gen_written)) {
            if (step_done(g_st[ST_BEGIN]) || write_run(0) || step_done(g_st[ST_COMMIT])) {
                ok = fail("cannot update run row") == 0;
                break;
            }
            wake_waiters();
        }
        if (!got && !in_txn) {
            if (atomic_load(&g_flush_req) > atomic_load(&g_committed) && atomic_load(&g_flush_req) <= tail) {
                atomic_store(&g_committed, tail);
                wake_waiters();
            }
            if (atomic_load(&g_stop)) {
                sched_yield();
                continue;
            }
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_mutex_lock(&g_mu);
            if (!atomic_load(&g_stop)) pthread_cond_timedwait(&g_cv, &g_mu, &ts);
            pthread_mutex_unlock(&g_mu);
        }
    }
    int discard = 0;
    if (ok && atomic_load(&g_stop)) {
        /* the end: what could not be written in time is counted, then the
         * final run row, then close (which checkpoints the WAL) */
        if (past_deadline()) drop_rest_counting();
        discard = atomic_load(&g_discard_if_empty) && !tpa_ring_used();
        if (!discard && ((!in_txn && step_done(g_st[ST_BEGIN])) || write_run(1) || step_done(g_st[ST_COMMIT])))
            fail("cannot write final run row");
        in_txn = 0;
    }
    if (atomic_load(&tpa_state) == TPA_DISABLED) {
        if (in_txn && g_db) sqlite3_exec(g_db, "ROLLBACK", NULL, NULL, NULL);
        drain_discarding();
    }
    close_db();
    if (discard) {
        remove_files();
        atomic_store(&g_removed, 1);
    }
    atomic_store(&g_committed, tpa_ring_tail());
    pthread_mutex_lock(&g_mu);
    atomic_store(&g_thread_live, 0);
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

#define TPA_WRITER_STACK (256u * 1024u)

static int start_locked(void) {
    if (atomic_load(&g_ready)) return 0;
    if (atomic_load(&tpa_state) != TPA_RUNNING) return TPAUDIT_EDISABLED;
    int rc = atomic_load(&g_reopen) ? reopen_db() : open_db();
    atomic_store(&g_reopen, 0);
    if (rc != 0) {
        close_db();
        remove_files();
        return -1;
    }
    sigset_t all, old;
    sigfillset(&all);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, TPA_WRITER_STACK);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    atomic_store(&g_stop, 0);
    atomic_store(&g_thread_live, 1);
    pthread_t th;
    rc = pthread_create(&th, &attr, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        atomic_store(&g_thread_live, 0);
        close_db();
        remove_files();
        tpa_disable("cannot start the writer thread (memory limit?)");
        return -1;
    }
    atomic_store(&g_ready, 1);
    return 0;
}

int tpa_writer_ensure(void) {
    if (atomic_load_explicit(&g_ready, memory_order_acquire)) return 0;
    if (atomic_load(&tpa_state) != TPA_RUNNING) return TPAUDIT_EDISABLED;
    pthread_mutex_lock(&g_start_mu);
    int rc = start_locked();
    pthread_mutex_unlock(&g_start_mu);
    return rc;
}

static void request_flush(uint64_t target) {
    uint64_t cur = atomic_load(&g_flush_req);
    while (cur < target && !atomic_compare_exchange_weak(&g_flush_req, &cur, target)) {
    }
}

int tpa_writer_flush(int timeout_ms) {
    if (atomic_load(&tpa_state) != TPA_RUNNING) return TPAUDIT_EDISABLED;
    if (!atomic_load(&g_ready)) return 0; /* a fork child that recorded nothing */
    uint64_t target = tpa_ring_head();
    unsigned gen = tpa_run_generation();
    request_flush(target);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&g_mu);
    pthread_cond_broadcast(&g_cv);
    int rc = 0;
    while ((atomic_load(&g_committed) < target || (int)(atomic_load(&g_run_gen_written) - gen) < 0) &&
           atomic_load(&tpa_state) == TPA_RUNNING &&
           atomic_load(&g_thread_live) && rc == 0)
        rc = pthread_cond_timedwait(&g_cv, &g_mu, &ts);
    pthread_mutex_unlock(&g_mu);
    if (atomic_load(&tpa_state) != TPA_RUNNING) return TPAUDIT_EDISABLED;
    return atomic_load(&g_committed) >= target ? 0 : TPAUDIT_EDISABLED;
}

static void nap_100us(void) {
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
}

/* From a signal handler: only atomics and nanosleep; the writer polls. */
int tpa_writer_flush_signal_safe(int timeout_ms) {
    if (atomic_load(&tpa_state) != TPA_RUNNING || !atomic_load(&g_thread_live)) return TPAUDIT_EDISABLED;
    uint64_t target = tpa_ring_flush_target();
    request_flush(target);
    int64_t end = tpa_now_ns() + (int64_t)timeout_ms * 1000000LL;
    while (tpa_now_ns() < end) {
        if (atomic_load(&g_committed) >= target) return 0;
        nap_100us();
    }
    return TPAUDIT_EDISABLED;
}

void tpa_writer_finish(int has_status, int exit_status, const char *ended_by, int discard_if_empty) {
    int expect = TPA_RUNNING;
    atomic_compare_exchange_strong(&tpa_state, &expect, TPA_CLOSED); /* producers stop here */
    if (!atomic_load(&g_ready) || !atomic_load(&g_thread_live)) return;
    g_final_has_status = has_status;
    g_final_status = exit_status;
    g_ended_by = ended_by;
    atomic_store(&g_discard_if_empty, discard_if_empty);
    int64_t now = tpa_now_ns();
    atomic_store(&g_drain_deadline, now + TPA_END_DRAIN_MS * 1000000LL);
    atomic_store(&g_stop, 1);
    int64_t end = now + (TPA_END_DRAIN_MS + TPA_END_CLOSE_MS) * 1000000LL;
    while (atomic_load(&g_thread_live) && tpa_now_ns() < end) nap_100us();
}

void tpa_writer_resume_after_exec(void) {
    if (atomic_load(&g_thread_live)) return; /* never stopped (timed out): it still runs */
    int expect = TPA_CLOSED;
    if (!atomic_compare_exchange_strong(&tpa_state, &expect, TPA_RUNNING)) return;
    atomic_store(&g_ready, 0);
    atomic_store(&g_stop, 0);
    atomic_store(&g_discard_if_empty, 0);
    if (atomic_load(&g_removed)) {
        atomic_store(&g_removed, 0); /* nothing was recorded: the next record starts a new file */
        return;
    }
    atomic_store(&g_reopen, 1);
    tpa_writer_ensure();
}

/* In the child: the parent's connection, statements and tables are
 * forgotten, never closed or freed (that would run SQLite's cleanup on the
 * parent's file, and touch pages the child shares with the parent); the
 * child's own database starts on its first record. */
void tpa_writer_reset_in_child(void) {
    int sqlite_unsafe = atomic_load(&g_sqlite_global_busy);
    pthread_mutex_init(&g_mu, NULL);
    pthread_cond_init(&g_cv, NULL);
    pthread_mutex_init(&g_start_mu, NULL);
    g_db = NULL;
    for (int i = 0; i < ST_COUNT; i++) g_st[i] = NULL;
    atomic_store(&g_stop, 0);
    atomic_store(&g_thread_live, 0);
    atomic_store(&g_ready, 0);
    atomic_store(&g_flush_req, 0);
    atomic_store(&g_committed, 0);
    atomic_store(&g_discard_if_empty, 0);
    atomic_store(&g_removed, 0);
    atomic_store(&g_reopen, 0);
    g_run_gen_written = 0;
    g_path[0] = 0;
    tpa_dbfd_forget_in_child();
    tpa_ring_reset_in_child();
    tpa_stack_reset();
    tpa_modules_reset();
    if (sqlite_unsafe && atomic_load(&tpa_state) == TPA_RUNNING) {
        atomic_store(&tpa_state, TPA_DISABLED); /* forked while SQLite changed its lists */
        tpa_log(TPA_LOG_INFO, "fork child: not recording (forked while the database was being opened)");
    }
}
