/* json_bench.c - the project's JSON reader and string writer against
 * SQLite's JSON functions (the SQLite the analyzer links), on the inputs
 * the reports see: a JSON report given as a baseline (the golden seed
 * report with its findings repeated to BIG findings) and the strings a
 * report writes (names, shapes, messages, with <, >, & and invalid UTF-8).
 * Prints the time of each and the ratio, and how many strings SQLite writes
 * differently from the report's escaping (docs/REPORT.md: <, >, & as \u
 * escapes, invalid UTF-8 as U+FFFD).  The figures are in docs/ANALYZER.md.
 *
 *     json_bench GOLDEN_JSON [BIG]
 */
#include "reports.h"

#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* The golden report with its findings array repeated `copies` times. */
static char *big_report(const char *path, int copies, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    size_t cap = 0;
    ssize_t n = getdelim(&text, &cap, 0, f);
    fclose(f);
    const char *open = n > 0 ? strstr(text, "\"findings\":[") : NULL;
    const char *close = open ? strstr(open, "],\n\"totals\"") : NULL;
    if (!close) return NULL;
    open += strlen("\"findings\":[");
    size_t item = (size_t)(close - open), head = (size_t)(open - text);
    char *out = malloc((size_t)n + item * (size_t)copies + (size_t)copies + 1), *o = out;
    memcpy(o, text, head), o += head;
    for (int i = 0; i < copies; i++) {
        if (i) *o++ = ',';
        memcpy(o, open, item), o += item;
    }
    strcpy(o, close);
    *len = strlen(out);
    free(text);
    return out;
}

static size_t count_values(const tpa_json_t *v) {
    size_t n = 1;
    for (size_t i = 0; i < tpa_json_len(v); i++) n += count_values(tpa_json_at(v, i));
    return n;
}

static void bench_reader(sqlite3 *db, const char *doc, size_t len, int rounds) {
    size_t ours = 0, theirs = 0;
    double t0 = now();
    for (int i = 0; i < rounds; i++) {
        tpa_json_t *v = tpa_json_parse(doc, len);
        ours = count_values(v);
        tpa_json_free(v);
    }
    double t1 = now();
    sqlite3_stmt *st;
    /* every row with what a tree would need of it (type, key, value, parent), no tree built */
    sqlite3_prepare_v2(db, "SELECT type, key, atom, parent FROM json_tree(?1)", -1, &st, NULL);
    for (int i = 0; i < rounds; i++) {
        sqlite3_bind_text(st, 1, doc, (int)len, SQLITE_STATIC);
        size_t rows = 0, bytes = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            rows++;
            for (int c = 0; c < 3; c++) bytes += (size_t)sqlite3_column_bytes(st, c);
            bytes += (size_t)sqlite3_column_int64(st, 3) & 1;
        }
        theirs = rows + (bytes == 0);
        sqlite3_reset(st);
    }
    sqlite3_finalize(st);
    double t2 = now();
    printf("reader: %zu bytes, %zu values (json_tree rows %zu), %d rounds\n", len, ours, theirs, rounds);
    printf("  tpa_json_parse (tree built)     %8.2f ms/doc\n", (t1 - t0) * 1e3 / rounds);
    printf("  SQLite json_tree (rows read)    %8.2f ms/doc  ratio %.2f (no tree built)\n",
           (t2 - t1) * 1e3 / rounds, (t2 - t1) / (t1 - t0));
}

static void bench_writer(sqlite3 *db, int rounds) {
    static const char *const strings[] = {
        "transformer.h.0.attn.c_attn.weight",
        "[50257,768]",
        "AdamW param_groups[0].params[0] holds wte.weight [50257,768], which is no longer a model parameter",
        "/home/user/project/train.py:42:main",
        "a <b> & c",
        "bad \xff\xfe utf-8",
        "tab\tand newline\n and \x01 control",
        "\xe2\x80\xae bidi override",
    };
    enum { N = sizeof strings / sizeof *strings };
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    double t0 = now();
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < N; i++) tpa_put_json_string(out, strings[i]);
    fflush(out);
    double t1 = now();
    sqlite3_stmt *st;
    sqlite3_prepare_v2(db, "SELECT json_quote(?1)", -1, &st, NULL);
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < N; i++) {
            sqlite3_bind_text(st, 1, strings[i], -1, SQLITE_STATIC);
            if (sqlite3_step(st) == SQLITE_ROW) fputs((const char *)sqlite3_column_text(st, 0), out);
            sqlite3_reset(st);
        }
    fflush(out);
    double t2 = now();
    sqlite3_finalize(st);
    int differ = 0;
    for (int i = 0; i < N; i++) {
        char *one = NULL, *two = NULL;
        size_t l1 = 0;
        FILE *a = open_memstream(&one, &l1);
        tpa_put_json_string(a, strings[i]);
        fclose(a);
        sqlite3_prepare_v2(db, "SELECT json_quote(?1)", -1, &st, NULL);
        sqlite3_bind_text(st, 1, strings[i], -1, SQLITE_STATIC);
        sqlite3_step(st);
        two = strdup((const char *)sqlite3_column_text(st, 0));
        sqlite3_finalize(st);
        if (strcmp(one, two)) {
            differ++;
            printf("  differs: ours %s, SQLite's %s\n", tpa_term(one), tpa_term(two));
        }
        free(one);
        free(two);
    }
    fclose(out);
    free(buf);
    printf("writer: %d strings x %d rounds\n", N, rounds);
    printf("  tpa_put_json_string             %8.1f ns/string\n", (t1 - t0) * 1e9 / ((double)rounds * N));
    printf("  SQLite json_quote               %8.1f ns/string  ratio %.2f\n", (t2 - t1) * 1e9 / ((double)rounds * N),
           (t2 - t1) / (t1 - t0));
    printf("  %d of %d strings written differently by json_quote\n", differ, N);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs("usage: json_bench GOLDEN_JSON [BIG]\n", stderr);
        return 2;
    }
    int big = argc > 2 ? atoi(argv[2]) : 2000;
    size_t len;
    char *doc = big_report(argv[1], big, &len);
    sqlite3 *db;
    if (!doc || sqlite3_open(":memory:", &db) != SQLITE_OK) {
        fprintf(stderr, "json_bench: cannot read %s\n", argv[1]);
        return 2;
    }
    printf("SQLite %s\n", sqlite3_libversion());
    bench_reader(db, doc, len, 20);
    bench_writer(db, 200000);
    sqlite3_close(db);
    free(doc);
    return 0;
}
