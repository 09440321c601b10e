/*
 * frames.c - which frames of a stack are the user's own code and which
 * belong to a library (site-packages, the standard library, the probe, the
 * interpreter and system libraries), and the library a frame belongs to:
 * the rule the reports and the shim's verdict line both show stacks by.
 */
#include "frames.h"

#include <string.h>

/* The part of path after "/site-packages/" or "/dist-packages/", or NULL. */
const char *tpa_packages_part(const char *path) {
    const char *marks[] = {"/site-packages/", "/dist-packages/"};
    for (size_t i = 0; i < 2; i++) {
        const char *at = strstr(path, marks[i]);
        if (at) return at + strlen(marks[i]);
    }
    return NULL;
}

/* The part of path from "pythonX.Y/" of a standard-library file, or NULL. */
const char *tpa_stdlib_part(const char *path) {
    for (const char *at = strstr(path, "/lib/python"); at; at = strstr(at + 1, "/lib/python")) {
        const char *p = at + strlen("/lib/python");
        if (*p < '0' || *p > '9') continue;
        while ((*p >= '0' && *p <= '9') || *p == '.') p++;
        if (*p == '/') return at + strlen("/lib/");
    }
    return NULL;
}

static const char *const PROBE_DIR = "/share/tpaudit/python/";

const char *tpa_base_name(const char *path) {
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

int tpa_frame_is_user(const tpa_frame_t *f) {
    const char *path = f->module ? f->module : f->file;
    if (!path || !*path || path[0] == '<') return 0; /* <frozen importlib._bootstrap>, <string> */
    if (tpa_packages_part(path) || tpa_stdlib_part(path)) return 0;
    if (strstr(path, PROBE_DIR)) return 0;
    if (f->module) {
        const char *base = tpa_base_name(path);
        if (!strncmp(path, "/usr/lib", 8) || !strncmp(path, "/lib", 4) || !strncmp(base, "libpython", 9) ||
            !strncmp(base, "python", 6) || !strncmp(base, "libtpaudit", 10))
            return 0;
    }
    return 1;
}

/* Copies the first n bytes of s into buf as a name. */
static const char *name_into(char *buf, size_t len, const char *s, size_t n) {
    if (n >= len) n = len - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
    return buf;
}

const char *tpa_frame_library(const tpa_frame_t *f, char *buf, size_t len) {
    const char *path = f->module ? f->module : f->file, *part;
    if (!path || !*path || path[0] == '<') return name_into(buf, len, "python", 6);
    if (f->module) {
        const char *base = tpa_base_name(path), *so = strstr(base, ".so");
        return name_into(buf, len, base, so && so != base ? (size_t)(so - base) : strlen(base));
    }
    if (strstr(path, PROBE_DIR)) return name_into(buf, len, "tpaudit", 7);
    if ((part = tpa_packages_part(path)) || (part = tpa_stdlib_part(path))) {
        size_t n = strcspn(part, "/");
        if (!part[n] && n > 3 && !strcmp(part + n - 3, ".py")) n -= 3; /* a top-level module: six.py */
        if (n) return name_into(buf, len, part, n);
    }
    return name_into(buf, len, "python", 6);
}

const tpa_frame_t *tpa_first_user_frame(const tpa_frames_t *fr) {
    for (size_t i = 0; i < fr->n; i++)
        if (tpa_frame_is_user(&fr->v[i])) return &fr->v[i];
    return fr->n ? &fr->v[0] : NULL;
}
