/* symbolize.c - offline symbolization of recorded native stacks: each
 * return address is mapped to its module through the database's module
 * table, then to function, file and line with elfutils' libdw where the
 * module (and its debug info) is readable here, else module+offset.  C++
 * names are demangled through libstdc++'s __cxa_demangle when that library
 * can be loaded (it is looked up at run time, so the analyzer stays C).
 * Bounded: at most TPA_MAX_FRAMES frames of a stack are read, each module
 * file is opened once per analysis, each (module, offset) resolved once
 * (databases of one job share their code), and the module table of a
 * database is read once into memory.  Safe across the loading threads:
 * the module table is the thread's own, the sessions and what they
 * resolved are shared under one lock. */
#include "analyzer.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const Dwfl_Callbacks OFFLINE_CALLBACKS = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);

static demangle_fn find_demangler(void) {
    static int looked;
    static demangle_fn fn;
    if (!looked) {
        looked = 1;
        void *lib = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        if (lib) *(void **)&fn = dlsym(lib, "__cxa_demangle");
    }
    return fn;
}

/* The readable form of a symbol: demangled C++ when possible, else as is. */
static char *readable_name(const char *name) {
    demangle_fn demangle = name[0] == '_' && name[1] == 'Z' ? find_demangler() : NULL;
    int status = -1;
    char *plain = demangle ? demangle(name, NULL, NULL, &status) : NULL;
    if (plain && status == 0) return plain;
    free(plain);
    return tpa_strdup(name);
}

/* One libdw session per module file, opened on first use and kept for the
 * whole analysis (modules are the same files across databases).  Files
 * that are not regular (a FIFO would block) or not ELF are remembered as
 * unreadable.  At most MAX_SESSIONS files are opened. */
#define MAX_SESSIONS 128
typedef struct session {
    char *path;
    Dwfl *dwfl; /* NULL: not readable */
    Dwfl_Module *mod;
    Dwarf_Addr base;
} session_t;
static session_t g_sessions[MAX_SESSIONS];
static size_t g_n_sessions;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

/* What (session, offset) resolved to: an open hash table, grown at 3/4. */
typedef struct resolved {
    const session_t *s; /* NULL: empty slot */
    uint64_t offset;
    char *function, *file;
    long line;
} resolved_t;
static struct {
    resolved_t *v;
    size_t cap, n;
} g_resolved;

static size_t slot_of(const resolved_t *v, size_t cap, const session_t *s, uint64_t offset) {
    size_t h = (size_t)((offset ^ (uint64_t)(uintptr_t)s) * 0x9E3779B97F4A7C15ull) & (cap - 1);
    while (v[h].s && (v[h].s != s || v[h].offset != offset)) h = (h + 1) & (cap - 1);
    return h;
}

/* The slot for (s, offset), found or new (s NULL in it); NULL when out of memory. */
static resolved_t *resolved_slot(const session_t *s, uint64_t offset) {
    if ((g_resolved.n + 1) * 4 > g_resolved.cap * 3) {
        size_t cap = g_resolved.cap ? g_resolved.cap * 2 : 1024;
        resolved_t *v = calloc(cap, sizeof *v);
        if (!v) return NULL;
        for (size_t i = 0; i < g_resolved.cap; i++)
            if (g_resolved.v[i].s) v[slot_of(v, cap, g_resolved.v[i].s, g_resolved.v[i].offset)] = g_resolved.v[i];
        free(g_resolved.v);
        g_resolved.v = v;
        g_resolved.cap = cap;
    }
    return &g_resolved.v[slot_of(g_resolved.v, g_resolved.cap, s, offset)];
}

static const session_t *session_for(const char *path) {
    for (size_t i = 0; i < g_n_sessions; i++)
        if (!strcmp(g_sessions[i].path, path)) return &g_sessions[i];
    if (g_n_sessions == MAX_SESSIONS) return NULL;
    session_t *s = &g_sessions[g_n_sessions];
    memset(s, 0, sizeof *s);
    s->path = tpa_strdup(path);
    if (!s->path) return NULL;
    g_n_sessions++;
    struct stat sb;
    if (path[0] != '/' || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return s;
    s->dwfl = dwfl_begin(&OFFLINE_CALLBACKS);
    if (!s->dwfl) return s;
    s->mod = dwfl_report_offline(s->dwfl, path, path, -1);
    dwfl_report_end(s->dwfl, NULL, NULL);
    if (!s->mod) {
        dwfl_end(s->dwfl);
        s->dwfl = NULL;
        return s;
    }
    dwfl_module_info(s->mod, NULL, &s->base, NULL, NULL, NULL, NULL, NULL);
    return s;
}

/* Looks `offset` up in session `s`'s module (function, file, line). */
static void lookup(const session_t *s, uint64_t offset, resolved_t *out) {
    /* Return addresses point after the call: look up the byte before. */
    Dwarf_Addr pc = s->base + offset - (offset ? 1 : 0);
    const char *name = dwfl_module_addrname(s->mod, pc);
    if (name) out->function = readable_name(name);
    Dwfl_Line *line = dwfl_module_getsrc(s->mod, pc);
    if (line) {
        int lineno = 0;
        const char *src = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
        if (src) {
            out->file = tpa_strdup(src);
            out->line = lineno;
        }
    }
}

/* Resolves `offset` (address - module base) inside the module at `path`. */
static void resolve_in_file(const char *path, uint64_t offset, tpa_frame_t *frame) {
    pthread_mutex_lock(&g_lock);
    const session_t *s = session_for(path);
    resolved_t *r = s && s->dwfl ? resolved_slot(s, offset) : NULL;
    if (r && !r->s) {
        *r = (resolved_t){s, offset, NULL, NULL, 0};
        g_resolved.n++;
        lookup(s, offset, r);
    }
    if (r) {
        frame->function = tpa_strdup(r->function);
        frame->file = tpa_strdup(r->file);
        frame->line = r->file ? r->line : 0;
    }
    pthread_mutex_unlock(&g_lock);
}

/* The module table of one database, in memory and sorted by `low`, with
 * the running maximum of `high` so an address is found by binary search
 * (the latest-loaded module containing it wins, as in the table). */
typedef struct module_row {
    int64_t id;
    char *path;
    uint64_t base;
    int64_t low, high, max_high;
} module_row_t;
static _Thread_local struct {
    sqlite3 *db;
    module_row_t *v;
    size_t n;
} g_modules;

static int by_low(const void *a, const void *b) {
    const module_row_t *x = a, *y = b;
    return x->low < y->low ? -1 : x->low > y->low ? 1 : x->id < y->id ? -1 : x->id > y->id;
}

void tpa_symbolize_forget(sqlite3 *db) {
    if (g_modules.db != db) return;
    for (size_t i = 0; i < g_modules.n; i++) free(g_modules.v[i].path);
    free(g_modules.v);
    memset(&g_modules, 0, sizeof g_modules);
}

static void load_modules(sqlite3 *db) {
    if (g_modules.db == db) return;
    tpa_symbolize_forget(g_modules.db);
    g_modules.db = db;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT id, path, base, low, high FROM module WHERE high > low", -1, &st, NULL) !=
        SQLITE_OK)
        return;
    size_t cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (g_modules.n == cap) {
            size_t grown = cap ? cap * 2 : 64;
            module_row_t *v = realloc(g_modules.v, grown * sizeof *v);
            if (!v) break;
            g_modules.v = v;
            cap = grown;
        }
        const char *path = (const char *)sqlite3_column_text(st, 1);
        g_modules.v[g_modules.n++] = (module_row_t){sqlite3_column_int64(st, 0),           tpa_strdup(path ? path : ""),
                                                    (uint64_t)sqlite3_column_int64(st, 2), sqlite3_column_int64(st, 3),
                                                    sqlite3_column_int64(st, 4),           0};
    }
    sqlite3_finalize(st);
    if (g_modules.n) qsort(g_modules.v, g_modules.n, sizeof *g_modules.v, by_low);
    int64_t max_high = INT64_MIN;
    for (size_t i = 0; i < g_modules.n; i++) {
        if (g_modules.v[i].high > max_high) max_high = g_modules.v[i].high;
        g_modules.v[i].max_high = max_high;
    }
}

/* Signed comparisons, as SQL compares the table's int64 columns. */
static const module_row_t *module_of(uint64_t ip) {
    int64_t a = (int64_t)ip;
    size_t lo = 0, hi = g_modules.n; /* first row with low > a */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g_modules.v[mid].low <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    const module_row_t *best = NULL;
    for (size_t i = lo; i-- > 0;) {
        const module_row_t *m = &g_modules.v[i];
        if (m->max_high <= a) break; /* no earlier row reaches a */
        if (a < m->high && (!best || m->id > best->id)) best = m;
    }
    return best;
}

/* Frames inside the tracing machinery (the shim, CUPTI, the driver's
 * callback dispatch) say nothing about who allocated: drop the leading ones. */
static int is_tool_frame(const tpa_frame_t *f) {
    static const char *TOOL_MODULES[] = {"libtpaudit.so", "libcupti.so", "libcuda.so"};
    if (!f->module) return 0;
    for (size_t i = 0; i < sizeof TOOL_MODULES / sizeof *TOOL_MODULES; i++)
        if (strstr(f->module, TOOL_MODULES[i])) return 1;
    return 0;
}

/* The CUDA runtime's own unnamed internals below its entry point (cudaMalloc). */
static int is_runtime_internal(const tpa_frame_t *f) {
    return f->module && strstr(f->module, "libcudart") && !f->function;
}

static void drop_tool_frames(tpa_frames_t *fr) {
    size_t skip = 0;
    while (skip < fr->n && is_tool_frame(&fr->v[skip])) skip++;
    while (skip < fr->n && is_runtime_internal(&fr->v[skip])) skip++;
    if (skip == fr->n) return; /* keep something to show */
    for (size_t i = 0; i < skip; i++) {
        free(fr->v[i].file);
        free(fr->v[i].function);
        free(fr->v[i].module);
    }
    memmove(fr->v, fr->v + skip, (fr->n - skip) * sizeof *fr->v);
    fr->n -= skip;
}

const char *tpa_module_path_of(sqlite3 *db, uint64_t ip) {
    load_modules(db);
    const module_row_t *m = module_of(ip);
    return m ? m->path : NULL;
}

int tpa_symbolize_stack(sqlite3 *db, int64_t stack_id, tpa_frames_t *out) {
    out->v = NULL;
    out->n = 0;
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, "SELECT depth, ips FROM stack WHERE id=?1", -1, &st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_int64(st, 1, stack_id);
    if (sqlite3_step(st) != SQLITE_ROW) {
        sqlite3_finalize(st);
        return 0;
    }
    load_modules(db);
    int depth = sqlite3_column_int(st, 0);
    const unsigned char *ips = sqlite3_column_blob(st, 1);
    int bytes = sqlite3_column_bytes(st, 1);
    if (depth > bytes / 8) depth = bytes / 8;
    if (depth > TPA_MAX_FRAMES) depth = TPA_MAX_FRAMES;
    if (depth > 0) out->v = calloc((size_t)depth, sizeof *out->v);
    for (int i = 0; out->v && i < depth; i++) {
        uint64_t ip = 0;
        for (int b = 7; b >= 0; b--) ip = (ip << 8) | ips[i * 8 + b];
        tpa_frame_t *frame = &out->v[out->n++];
        frame->address = ip;
        const module_row_t *m = module_of(ip);
        if (m) {
            frame->module = tpa_strdup(m->path);
            frame->address = ip - m->base;
            resolve_in_file(m->path, ip - m->base, frame);
        }
    }
    sqlite3_finalize(st);
    drop_tool_frames(out);
    return 0;
}
