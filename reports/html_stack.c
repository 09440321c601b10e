/*
 * html_stack.c - stacks as a reader wants them: the user's own frames
 * first, the frames of installed packages (site-packages), the standard
 * library, the interpreter and system libraries folded into <details>, and
 * paths shown relative to the project root, which is derived from the
 * runs' script argument and the user frames.
 */
#include "html_page.h"

#include <stdlib.h>
#include <string.h>

/* The part of path after "/site-packages/" or "/dist-packages/", or NULL. */
static const char *after_packages(const char *path) {
    const char *marks[] = {"/site-packages/", "/dist-packages/"};
    for (size_t i = 0; i < 2; i++) {
        const char *at = strstr(path, marks[i]);
        if (at) return at + strlen(marks[i]);
    }
    return NULL;
}

/* The part of path from "pythonX.Y/" of a standard-library file, or NULL. */
static const char *stdlib_part(const char *path) {
    for (const char *at = strstr(path, "/lib/python"); at; at = strstr(at + 1, "/lib/python")) {
        const char *p = at + strlen("/lib/python");
        if (*p < '0' || *p > '9') continue;
        while ((*p >= '0' && *p <= '9') || *p == '.') p++;
        if (*p == '/') return at + strlen("/lib/");
    }
    return NULL;
}

static const char *base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int html_frame_is_user(const tpa_frame_t *f) {
    const char *path = f->module ? f->module : f->file;
    if (!path || !*path || path[0] == '<') return 0; /* <frozen importlib._bootstrap>, <string> */
    if (after_packages(path) || stdlib_part(path)) return 0;
    if (strstr(path, "/share/tpaudit/python/")) return 0; /* the probe */
    if (f->module) {
        const char *base = base_name(path);
        if (!strncmp(path, "/usr/lib", 8) || !strncmp(path, "/lib", 4) || !strncmp(base, "libpython", 9) ||
            !strncmp(base, "python", 6) || !strncmp(base, "libtpaudit", 10))
            return 0;
    }
    return 1;
}

const tpa_frame_t *html_first_user_frame(const tpa_frames_t *fr) {
    for (size_t i = 0; i < fr->n; i++)
        if (html_frame_is_user(&fr->v[i])) return &fr->v[i];
    return fr->n ? &fr->v[0] : NULL;
}

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

/* The script of a python argv: the first argument after the interpreter
 * ending in ".py". */
static const char *script_of(char **argv, size_t n) {
    for (size_t i = 1; i < n; i++) {
        size_t len = strlen(argv[i]);
        if (len > 3 && !strcmp(argv[i] + len - 3, ".py")) return argv[i];
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
    if (!f->file || f->module || f->file[0] != '/' || !html_frame_is_user(f)) return;
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
static void take(html_paths_t *p, char *dir) {
    if (!dir) return;
    if (!p->root) {
        p->root = dir;
        return;
    }
    common_dir(p->root, dir);
    free(dir);
}

int html_paths_init(html_paths_t *p, const tpa_report_t *r) {
    root_search_t rs = {0};
    p->root = NULL;
    for (size_t i = 0; i < r->n_runs; i++) {
        size_t n;
        char **argv = html_argv_parse(r->runs[i].argv, &n);
        const char *script = argv ? script_of(argv, n) : NULL;
        if (script && script[0] == '/')
            take(p, dir_of(script, strlen(script)));
        else if (script) {
            while (!strncmp(script, "./", 2)) script += 2;
            rs.script = script;
            rs.found = NULL;
            each_frame(r, visit, &rs);
            take(p, rs.found);
        }
        html_argv_free(argv, n);
    }
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

void html_paths_free(html_paths_t *p) {
    free(p->root);
    p->root = NULL;
}

/* The path to show: relative to the root, after site-packages, or from
 * pythonX.Y/ in the standard library; else as stored. */
static const char *short_path(const html_paths_t *p, const char *path) {
    size_t rl = p->root ? strlen(p->root) : 0;
    if (rl && !strncmp(path, p->root, rl) && path[rl]) return path + rl;
    const char *part = after_packages(path);
    if (!part) part = stdlib_part(path);
    return part && *part ? part : path;
}

void html_put_frame(FILE *out, const html_paths_t *p, const tpa_frame_t *f) {
    const char *path = f->file ? f->file : f->module;
    fputs("<span class=\"frame\" title=\"", out);
    html_put(out, path);
    fputs("\"><code>", out);
    if (f->file) {
        html_put(out, short_path(p, f->file));
        fprintf(out, ":%ld</code> in <b>", f->line);
        html_put(out, f->function ? f->function : "?");
        fputs("</b>", out);
    } else {
        html_put(out, f->function ? f->function : "??");
        fputs("</code> (", out);
        html_put(out, path ? base_name(path) : "?");
        fprintf(out, "+0x%llx)", (unsigned long long)f->address);
    }
    fputs("</span>", out);
}

static void put_item(FILE *out, const html_paths_t *p, const tpa_frame_t *f) {
    fprintf(out, "<li class=\"%s\">", html_frame_is_user(f) ? "user" : "lib");
    html_put_frame(out, p, f);
    fputs("</li>\n", out);
}

void html_put_stack(FILE *out, const html_paths_t *p, const char *title, const tpa_frames_t *fr) {
    if (!fr->n) return;
    size_t users = 0;
    for (size_t i = 0; i < fr->n; i++) users += html_frame_is_user(&fr->v[i]);
    size_t shown = users ? users : (fr->n < 3 ? fr->n : 3);
    fputs("<div class=\"stack\"><h4>", out);
    html_put(out, title);
    fputs("</h4>\n<ol class=\"frames\">\n", out);
    for (size_t i = 0, k = 0; i < fr->n && k < shown; i++)
        if (!users || html_frame_is_user(&fr->v[i])) {
            put_item(out, p, &fr->v[i]);
            k++;
        }
    fputs("</ol>\n", out);
    if (shown < fr->n) {
        fprintf(
            out,
            "<details><summary>show all %zu frames (%zu in libraries folded)</summary>\n<ol class=\"frames all\">\n",
            fr->n, fr->n - shown);
        for (size_t i = 0; i < fr->n; i++) put_item(out, p, &fr->v[i]);
        fputs("</ol></details>\n", out);
    }
    fputs("</div>\n", out);
}
