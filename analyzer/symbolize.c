/* symbolize.c - offline symbolization of recorded native stacks: each
 * return address is mapped to its module through the database's module
 * table, then to function, file and line with elfutils' libdw where the
 * module (and its debug info) is readable here, else module+offset.  C++
 * names are demangled through libstdc++'s __cxa_demangle when that library
 * can be loaded (it is looked up at run time, so the analyzer stays C). */
#include "analyzer.h"

#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <stdlib.h>
#include <string.h>

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

/* Resolves `offset` (address - module base) inside the file at `path`. */
static void resolve_in_file(const char *path, uint64_t offset, tpa_frame_t *frame) {
    Dwfl *dwfl = dwfl_begin(&OFFLINE_CALLBACKS);
    if (!dwfl) return;
    Dwfl_Module *mod = dwfl_report_offline(dwfl, path, path, -1);
    dwfl_report_end(dwfl, NULL, NULL);
    if (mod) {
        Dwarf_Addr base = 0;
        dwfl_module_info(mod, NULL, &base, NULL, NULL, NULL, NULL, NULL);
        /* Return addresses point after the call: look up the byte before. */
        Dwarf_Addr pc = base + offset - (offset ? 1 : 0);
        const char *name = dwfl_module_addrname(mod, pc);
        if (name) frame->function = readable_name(name);
        Dwfl_Line *line = dwfl_module_getsrc(mod, pc);
        if (line) {
            int lineno = 0;
            const char *src = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
            if (src) { frame->file = tpa_strdup(src); frame->line = lineno; }
        }
    }
    dwfl_end(dwfl);
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

int tpa_symbolize_stack(sqlite3 *db, int64_t stack_id, tpa_frames_t *out) {
    out->v = NULL;
    out->n = 0;
    sqlite3_stmt *st, *mod;
    if (sqlite3_prepare_v2(db, "SELECT depth, ips FROM stack WHERE id=?1", -1, &st, NULL) != SQLITE_OK) return -1;
    sqlite3_bind_int64(st, 1, stack_id);
    if (sqlite3_step(st) != SQLITE_ROW) { sqlite3_finalize(st); return 0; }
    int depth = sqlite3_column_int(st, 0);
    const unsigned char *ips = sqlite3_column_blob(st, 1);
    int bytes = sqlite3_column_bytes(st, 1);
    if (depth > bytes / 8) depth = bytes / 8;
    if (depth > 0) out->v = calloc((size_t)depth, sizeof *out->v);
    if (sqlite3_prepare_v2(db, "SELECT path, base FROM module WHERE low<=?1 AND ?1<high ORDER BY id DESC LIMIT 1", -1, &mod, NULL) != SQLITE_OK) {
        sqlite3_finalize(st);
        return -1;
    }
    for (int i = 0; out->v && i < depth; i++) {
        uint64_t ip = 0;
        for (int b = 7; b >= 0; b--) ip = (ip << 8) | ips[i * 8 + b];
        tpa_frame_t *frame = &out->v[out->n++];
        frame->address = ip;
        sqlite3_reset(mod);
        sqlite3_bind_int64(mod, 1, (int64_t)ip);
        if (sqlite3_step(mod) == SQLITE_ROW) {
            const char *path = (const char *)sqlite3_column_text(mod, 0);
            uint64_t base = (uint64_t)sqlite3_column_int64(mod, 1);
            frame->module = tpa_strdup(path);
            frame->address = ip - base;
            if (path && path[0] == '/') resolve_in_file(path, ip - base, frame);
        }
    }
    sqlite3_finalize(mod);
    sqlite3_finalize(st);
    drop_tool_frames(out);
    return 0;
}
