/* modules.c - the module table for offline symbolization: every loaded ELF
 * object from dl_iterate_phdr with its address range and GNU build-id.
 * The writer compares the loader's adds/subs counters before each batch
 * and rescans only when something was loaded or unloaded. */
#include <elf.h>
#include <link.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "binds.h"

struct mod {
    char *path;
    uint64_t base, low, high;
    int64_t id;
    int seen;
};
static struct mod *g_mods;
static size_t g_n, g_cap;
static unsigned long long g_adds = ~0ULL, g_subs = ~0ULL;
static int64_t g_next_id = 1;

/* Fork child: the parent's list is dropped, not freed (shared pages). */
void tpa_modules_reset(void) {
    g_mods = NULL;
    g_n = g_cap = 0;
    g_adds = g_subs = ~0ULL;
    g_next_id = 1;
}

static int read_counters(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    unsigned long long *c = data;
    c[0] = info->dlpi_adds;
    c[1] = info->dlpi_subs;
    return 1;
}

struct scan {
    sqlite3_stmt *ins;
    int err;
    int64_t now;
};

static void build_id_hex(struct dl_phdr_info *info, char *out, size_t cap) {
    out[0] = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_NOTE) continue;
        const unsigned char *p = (const unsigned char *)(info->dlpi_addr + ph->p_vaddr);
        const unsigned char *end = p + ph->p_memsz;
        while (p + sizeof(ElfW(Nhdr)) <= end) {
            const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
            const unsigned char *name = p + sizeof *nh;
            const unsigned char *desc = name + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
                size_t k = 0;
                for (unsigned j = 0; j < nh->n_descsz && k + 3 < cap; j++, k += 2)
                    snprintf(out + k, 3, "%02x", desc[j]);
                return;
            }
            p = desc + ((nh->n_descsz + 3) & ~3u);
        }
    }
}

/* One module table row (records.h). */
static int insert_row(sqlite3_stmt *st, const struct mod *m, struct dl_phdr_info *info, int64_t now) {
    char bid[128];
    build_id_hex(info, bid, sizeof bid);
    int col = 0;
    sqlite3_reset(st);
    TPA_MODULE_COLUMNS(BIND)
    return sqlite3_step(st) == SQLITE_DONE ? 0 : -1;
}

static int on_module(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    struct scan *s = data;
    const char *path = info->dlpi_name && *info->dlpi_name ? info->dlpi_name : NULL;
    char exe[4096];
    if (!path) {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        path = exe;
    }
    uint64_t low = UINT64_MAX, high = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uint64_t a = info->dlpi_addr + ph->p_vaddr;
        if (a < low) low = a;
        if (a + ph->p_memsz > high) high = a + ph->p_memsz;
    }
    if (high == 0) return 0;
    for (size_t i = 0; i < g_n; i++)
        if (g_mods[i].base == info->dlpi_addr && g_mods[i].low == low && !strcmp(g_mods[i].path, path)) {
            g_mods[i].seen = 1;
            return 0;
        }
    if (g_n == g_cap) {
        size_t cap = g_cap ? g_cap * 2 : 64;
        struct mod *m = realloc(g_mods, cap * sizeof *m);
        if (!m) {
            s->err = 1;
            return 1;
        }
        g_mods = m;
        g_cap = cap;
    }
    struct mod *m = &g_mods[g_n];
    m->path = strdup(path);
    if (!m->path) {
        s->err = 1;
        return 1;
    }
    m->base = info->dlpi_addr;
    m->low = low;
    m->high = high;
    m->id = g_next_id++;
    m->seen = 1;
    g_n++;
    if (insert_row(s->ins, m, info, s->now) != 0) {
        s->err = 1;
        return 1;
    }
    return 0;
}

int tpa_modules_refresh(sqlite3_stmt *ins, sqlite3_stmt *unload, int force) {
    unsigned long long c[2] = {0, 0};
    dl_iterate_phdr(read_counters, c);
    if (!force && c[0] == g_adds && c[1] == g_subs) return 0;
    g_adds = c[0];
    g_subs = c[1];
    for (size_t i = 0; i < g_n; i++) g_mods[i].seen = 0;
    struct scan s = {ins, 0, tpa_now_ns()};
    dl_iterate_phdr(on_module, &s);
    if (s.err) return -1;
    size_t w = 0;
    for (size_t i = 0; i < g_n; i++) {
        if (g_mods[i].seen) {
            g_mods[w++] = g_mods[i];
            continue;
        }
        sqlite3_reset(unload);
        sqlite3_bind_int64(unload, 1, s.now);
        sqlite3_bind_int64(unload, 2, g_mods[i].id);
        int rc = sqlite3_step(unload);
        free(g_mods[i].path);
        if (rc != SQLITE_DONE) return -1;
    }
    g_n = w;
    return 0;
}
