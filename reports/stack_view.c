/*
 * stack_view.c - the one place that decides how a stack is shown: the
 * project root derived from the runs' script argument and the user frames
 * (which frames are the user's is rules/frames.c's), paths relative to it,
 * a run's program name, and the text form of a stack (outermost first,
 * library stretches folded).  The HTML (html_stack.c) and the text report
 * both use it.
 */
#include "stack_view.h"

#include <stdlib.h>
#include <string.h>

/* Shrinks the directory prefix *root (ending in '/') to one that path also
 * starts with; it becomes empty when they share nothing. */
static void common_dir(char *root, const char *path) {
    size_t i = 0, last = 0;
    while (root[i] && root[i] == path[i]) {
        if (root[i] == '/') last = i + 1;
        i++;
    }
    if (root[i]) root[last] = 0;
}

static char *dir_of(const char *path, size_t len) {
    while (len && path[len - 1] != '/') len--;
    char *d = malloc(len + 1);
    if (d) {
        memcpy(d, path, len);
        d[len] = 0;
    }
    return d;
}

/* The run's argv parsed (a JSON array), NULL when it is not one. */
static tpa_json_t *argv_of(const tpa_run_t *run) {
    tpa_json_t *argv = run->argv ? tpa_json_parse(run->argv, strlen(run->argv)) : NULL;
    if (argv && tpa_json_type(argv) != TPA_JSON_ARRAY) {
        tpa_json_free(argv);
        return NULL;
    }
    return argv;
}

static const char *arg(const tpa_json_t *argv, size_t i) { return tpa_json_str(tpa_json_at(argv, i)); }

/* The script of a python argv: the first argument after the interpreter
 * ending in ".py". */
static const char *script_of(const tpa_json_t *argv) {
    for (size_t i = 1; i < tpa_json_len(argv); i++) {
        const char *a = arg(argv, i);
        size_t len = a ? strlen(a) : 0;
        if (len > 3 && !strcmp(a + len - 3, ".py")) return a;
    }
    return NULL;
}

/* Calls fn on every frame of every finding. */
static void each_frame(const tpa_report_t *r, void (*fn)(const tpa_frame_t *, void *), void *ctx) {
    for (size_t i = 0; i < r->n_findings; i++) {
        const tpa_frames_t *stacks[] = {&r->findings[i].created_at, &r->findings[i].replaced_at,
                                        &r->findings[i].alloc_stack};
        for (size_t s = 0; s < 3; s++)
            for (size_t k = 0; k < stacks[s]->n; k++) fn(&stacks[s]->v[k], ctx);
    }
}

typedef struct root_search {
    const char *script; /* relative script path, "./" stripped */
    char *found;        /* the frame path's prefix before it */
    char *common;       /* common directory of the user frames */
    int oom;
} root_search_t;

static void visit(const tpa_frame_t *f, void *ctx) {
    root_search_t *rs = ctx;
    if (!f->file || f->module || f->file[0] != '/' || !tpa_frame_is_user(f)) return;
    size_t len = strlen(f->file);
    if (rs->script && !rs->found) {
        size_t sl = strlen(rs->script);
        if (len > sl && f->file[len - sl - 1] == '/' && !strcmp(f->file + len - sl, rs->script))
            if (!(rs->found = dir_of(f->file, len - sl))) rs->oom = 1;
    }
    if (!rs->common) {
        if (!(rs->common = dir_of(f->file, len))) rs->oom = 1;
    } else
        common_dir(rs->common, f->file);
}

/* Adds a candidate root: the first one, then their common directory. */
static void take(tpa_paths_t *p, char *dir) {
    if (!dir) return;
    if (!p->root) {
        p->root = dir;
        return;
    }
    common_dir(p->root, dir);
    free(dir);
}

/* The root from each run's script: its directory when absolute, else the
 * prefix before it in a frame's path. */
static void roots_from_scripts(tpa_paths_t *p, const tpa_report_t *r, root_search_t *rs) {
    for (size_t i = 0; i < r->n_runs; i++) {
        tpa_json_t *argv = argv_of(&r->runs[i]);
        const char *script = argv ? script_of(argv) : NULL;
        if (script && script[0] == '/')
            take(p, dir_of(script, strlen(script)));
        else if (script) {
            while (!strncmp(script, "./", 2)) script += 2;
            rs->script = script;
            rs->found = NULL;
            each_frame(r, visit, rs);
            take(p, rs->found);
        }
        tpa_json_free(argv);
    }
}

int tpa_paths_init(tpa_paths_t *p, const tpa_report_t *r) {
    root_search_t rs = {0};
    p->root = NULL;
    roots_from_scripts(p, r, &rs);
    if (!p->root) {
        rs.script = NULL;
        each_frame(r, visit, &rs);
        size_t slashes = 0;
        for (const char *c = rs.common; c && *c; c++) slashes += *c == '/';
        if (slashes >= 3) {
            p->root = rs.common;
            rs.common = NULL;
        } /* "/a/b/" at least */
    }
    free(rs.common);
    if (p->root && !p->root[0]) {
        free(p->root);
        p->root = NULL;
    }
    return rs.oom ? -1 : 0;
}

void tpa_paths_free(tpa_paths_t *p) {
    free(p->root);
    p->root = NULL;
}

const char *tpa_short_path(const tpa_paths_t *p, const char *path) {
    size_t rl = p->root ? strlen(p->root) : 0;
    if (rl && !strncmp(path, p->root, rl) && path[rl]) return path + rl;
    const char *part = tpa_packages_part(path);
    if (!part) part = tpa_stdlib_part(path);
    return part && *part ? part : path;
}

/* The program's name in argv: the module of -m, the first non-option
 * argument of an interpreter, else argv[0]; NULL when none. */
static const char *program_arg(const tpa_json_t *argv, size_t *len) {
    const char *prog = arg(argv, 0);
    if (!prog) return NULL;
    if (!strncmp(tpa_base_name(prog), "python", 6))
        for (size_t i = 1; i < tpa_json_len(argv); i++) {
            const char *a = arg(argv, i);
            if (!a || !strcmp(a, "-c")) break;
            if (!strcmp(a, "-m")) {
                prog = arg(argv, i + 1) ? arg(argv, i + 1) : prog;
                break;
            }
            if (!strcmp(a, "-X") || !strcmp(a, "-W")) { /* options with a separate value */
                i++;
                continue;
            }
            if (a[0] != '-') {
                prog = a;
                break;
            }
        }
    prog = tpa_base_name(prog);
    *len = strlen(prog);
    if (*len > 3 && !strcmp(prog + *len - 3, ".py")) *len -= 3;
    return prog;
}

const char *tpa_run_program(const tpa_run_t *run, char *buf, size_t len) {
    tpa_json_t *argv = argv_of(run);
    size_t n = 0;
    const char *prog = argv ? program_arg(argv, &n) : NULL;
    if (!prog || !n) prog = "process", n = 7;
    snprintf(buf, len, "%.*s", (int)n, prog);
    for (char *c = buf; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '_' ||
              *c == '.' || *c == '-'))
            *c = '_';
    tpa_json_free(argv);
    return buf;
}

static void put_text_frame(FILE *out, const tpa_paths_t *p, const tpa_frame_t *f) {
    if (f->file)
        fprintf(out, "        %s:%ld in %s\n", tpa_term(tpa_short_path(p, f->file)), f->line,
                tpa_term(f->function ? f->function : "?"));
    else
        fprintf(out, "        %s (%s+0x%llx)\n", tpa_term(f->function ? f->function : "??"),
                tpa_term(f->module ? tpa_base_name(f->module) : "?"), (unsigned long long)f->address);
}

/* Appends lib to the ", "-separated list names unless it is there; at most
 * three names, then "...". */
static void add_library(char *names, size_t len, const char *lib) {
    size_t n = 0, used = strlen(names);
    for (const char *at = names; *at; n++) {
        size_t w = strcspn(at, ",");
        if (w == strlen(lib) && !strncmp(at, lib, w)) return;
        at += w + (at[w] ? 2 : 0);
    }
    if (n > 3) return;
    if (n == 3) lib = "...";
    snprintf(names + used, len - used, "%s%s", used ? ", " : "", lib);
}

/* The libraries a model is made of: a call into them from a framework is
 * the framework's doing. */
static const char *const MODEL_LIBRARIES[] = {"torch", "transformers"};

static int model_library(const char *lib) {
    for (size_t i = 0; i < sizeof MODEL_LIBRARIES / sizeof *MODEL_LIBRARIES; i++)
        if (!strcmp(lib, MODEL_LIBRARIES[i])) return 1;
    return 0;
}

/* The standard library ("python3.11"), code of no file ("python") and the
 * probe: passed over between a framework and the model library it calls. */
static int passed_over(const char *lib) { return !strncmp(lib, "python", 6) || !strcmp(lib, "tpaudit"); }

int tpa_frame_made_the_call(const tpa_frames_t *fr, size_t i) {
    const tpa_frame_t *f = &fr->v[i];
    char lib[64];
    if (!f->file || f->module || tpa_frame_is_user(f) || !tpa_packages_part(f->file)) return 0;
    tpa_frame_library(f, lib, sizeof lib);
    if (model_library(lib)) return 0;
    for (size_t k = i; k-- > 0;) {
        if (tpa_frame_is_user(&fr->v[k])) return 0;
        tpa_frame_library(&fr->v[k], lib, sizeof lib);
        if (model_library(lib)) return 1;
        if (!passed_over(lib)) return 0;
    }
    return 0;
}

void tpa_put_text_stack(FILE *out, const tpa_paths_t *p, const char *title, const tpa_frames_t *fr) {
    if (!fr->n) return;
    size_t users = 0;
    for (size_t i = 0; i < fr->n; i++) users += tpa_frame_is_user(&fr->v[i]);
    fprintf(out, "      %s (most recent call last):\n", title);
    /* Frames are stored innermost first: walk from the end. Shown in full:
     * the user's frames and the innermost one (the call that did it, as a
     * traceback ends), or the innermost three when no frame is the user's,
     * and the frames that made the call; each stretch of two or more others
     * is one line naming their libraries. */
    for (size_t i = fr->n; i-- > 0;) {
        size_t n = 0;
        while (n <= i && !(users ? tpa_frame_is_user(&fr->v[i - n]) || i == n : i - n < 3) &&
               !tpa_frame_made_the_call(fr, i - n))
            n++;
        if (n < 2) {
            put_text_frame(out, p, &fr->v[i]);
            continue;
        }
        char names[200] = "", lib[64];
        for (size_t k = 0; k < n; k++) add_library(names, sizeof names, tpa_frame_library(&fr->v[i - k], lib, sizeof lib));
        fprintf(out, "        ... %zu frames in %s\n", n, tpa_term(names));
        i -= n - 1;
    }
}
