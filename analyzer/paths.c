/* paths.c - the one path loader of the verbs: PATH arguments (databases,
 * directories of *.db, or one JSON report) into a report, and the one
 * `tpaudit:` line when they cannot be read. */
#include "analyzer.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int add_path(char ***files, size_t *n, const char *p) {
    char **v = realloc(*files, (*n + 1) * sizeof *v);
    if (!v) return -1;
    *files = v;
    v[*n] = tpa_strdup(p);
    if (!v[*n]) return -1;
    (*n)++;
    return 0;
}

/* The *.db regular files of directory `dir`, sorted, added to files; a link
 * that leads to no file is skipped with one warning line for all of them.
 * 0, or -1 with why (none found, out of memory). */
static int add_dir(const char *dir, char ***files, size_t *n_files, char *why, size_t why_len) {
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(why, why_len, "cannot read directory %s", dir);
        return -1;
    }
    size_t before = *n_files, broken = 0;
    char first_broken[4200] = "";
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 4 || strcmp(e->d_name + len - 3, ".db")) continue;
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
        struct stat eb; /* a FIFO, device or directory named *.db in a directory is not a database */
        if (stat(full, &eb) == 0 && !S_ISREG(eb.st_mode)) continue;
        if (stat(full, &eb) != 0 && lstat(full, &eb) == 0 && S_ISLNK(eb.st_mode)) {
            /* a dangling or looping link: said once below, the others are read */
            if (!broken++) snprintf(first_broken, sizeof first_broken, "%s (%s)", full, strerror(errno));
            continue;
        }
        if (add_path(files, n_files, full)) {
            closedir(d);
            snprintf(why, why_len, "out of memory");
            return -1;
        }
    }
    closedir(d);
    if (*n_files == before) {
        snprintf(why, why_len, "%s holds no tpaudit databases (*.db)%s", dir, broken ? ", only links to nothing" : "");
        return -1;
    }
    if (broken == 1)
        fprintf(stderr, "tpaudit: warning: skipped %s: a link to no file\n", tpa_term(first_broken));
    else if (broken)
        fprintf(stderr, "tpaudit: warning: skipped %zu *.db links to no file in %s (first: %s)\n", broken,
                tpa_term(dir), tpa_term(first_broken));
    qsort(*files + before, *n_files - before, sizeof **files, cmp_str);
    return 0;
}

int tpa_collect_paths(int n, char **args, char ***files, size_t *n_files, char *why, size_t why_len) {
    *files = NULL;
    *n_files = 0;
    for (int i = 0; i < n; i++) {
        struct stat sb;
        if (stat(args[i], &sb) != 0) {
            snprintf(why, why_len, "%s: no such file or directory", args[i]);
            return -1;
        }
        if (S_ISDIR(sb.st_mode)) {
            if (add_dir(args[i], files, n_files, why, why_len)) return -1;
        } else if (add_path(files, n_files, args[i])) {
            snprintf(why, why_len, "out of memory");
            return -1;
        }
    }
    if (!*n_files) {
        snprintf(why, why_len, "no databases given");
        return -1;
    }
    return 0;
}

int tpa_load_inputs(int n, char **paths, int json_ok, int needs, tpa_report_t *r, char *why, size_t why_len) {
    memset(r, 0, sizeof *r);
    if (json_ok && n == 1 && tpa_is_json_report(paths[0])) return tpa_read_json_report(paths[0], r, why, why_len);
    char **files;
    size_t n_files;
    if (tpa_collect_paths(n, paths, &files, &n_files, why, why_len)) return -1;
    int rc = tpa_analyze_for(files, n_files, needs, r, why, why_len);
    for (size_t i = 0; i < n_files; i++) free(files[i]);
    free(files);
    return rc;
}

int tpa_load_or_say_for(int n, char **paths, int json_ok, int needs, tpa_report_t *r) {
    char why[8400] = "";
    int rc = tpa_load_inputs(n, paths, json_ok, needs, r, why, sizeof why);
    if (rc) fprintf(stderr, "tpaudit: %s\n", tpa_term(why));
    return rc;
}

int tpa_load_or_say(int n, char **paths, int json_ok, tpa_report_t *r) {
    return tpa_load_or_say_for(n, paths, json_ok, TPA_NEED_ALL, r);
}
