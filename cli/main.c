/* main.c - the tpaudit command line: dispatches to run, report, gate, diff, kinds;
 * -V/--version; a mistyped command gets a suggestion. */
#include "analyzer.h"
#include "launcher.h"
#include "verbs.h"

#include <stdio.h>
#include <string.h>

#ifndef TPA_TOOL_VERSION
#define TPA_TOOL_VERSION "unknown"
#endif

static const char *const COMMANDS[] = {"run", "report", "gate", "diff", "kinds", "help"};

static void usage(FILE *out) {
    fputs("usage: tpaudit <command> [options]\n"
          "  run [-o DIR] [--] CMD...      run CMD under the shim, one database per process\n"
          "  report [--format F] PATH...   text, json, html or junit report\n"
          "  gate [options] PATH...        CI gate on retained memory and findings\n"
          "  diff OLD NEW                  findings that appeared, disappeared or grew\n"
          "  kinds                         the finding kinds: name, severity, meaning\n"
          "  <command> --help              options of a command\n"
          "  -V, --version                 the version\n"
          "exit: 0 clean/passed, 1 gate failed, 2 usage or bad input, 3 inconclusive\n",
          out);
}

/* Edit distance (insert, delete, substitute, swap of neighbours), capped. */
static size_t distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 31 || lb > 31) return 99;
    size_t d[32][32];
    for (size_t i = 0; i <= la; i++) d[i][0] = i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

/* The command `verb` most likely meant, or NULL: a prefix of exactly one
 * command, else the nearest within 2 edits (1 for short words). */
static const char *suggest(const char *verb) {
    size_t n = strlen(verb), prefix_hits = 0;
    const char *prefix = NULL, *best = NULL;
    size_t best_d = 99;
    for (size_t i = 0; i < sizeof COMMANDS / sizeof *COMMANDS; i++) {
        if (n && !strncmp(COMMANDS[i], verb, n)) prefix = COMMANDS[i], prefix_hits++;
        size_t d = distance(verb, COMMANDS[i]);
        if (d < best_d) best_d = d, best = COMMANDS[i];
    }
    if (prefix_hits == 1 && n >= 2) return prefix;
    return best_d <= (n <= 3 ? 1u : 2u) ? best : NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return TPA_EXIT_USAGE;
    }
    const char *verb = argv[1];
    if (!strcmp(verb, "run")) return tpa_cmd_run(argc - 1, argv + 1);
    if (!strcmp(verb, "report")) return tpa_cmd_report(argc - 1, argv + 1);
    if (!strcmp(verb, "gate")) return tpa_cmd_gate(argc - 1, argv + 1);
    if (!strcmp(verb, "diff")) return tpa_cmd_diff(argc - 1, argv + 1);
    if (!strcmp(verb, "kinds")) return tpa_cmd_kinds(argc - 1, argv + 1);
    if (!strcmp(verb, "-h") || !strcmp(verb, "--help") || !strcmp(verb, "help")) {
        usage(stdout);
        return TPA_EXIT_OK;
    }
    if (!strcmp(verb, "-V") || !strcmp(verb, "--version")) {
        puts("tpaudit " TPA_TOOL_VERSION);
        return TPA_EXIT_OK;
    }
    const char *near = suggest(verb);
    if (near)
        fprintf(stderr, "tpaudit: unknown command '%s'; did you mean %s? (tpaudit --help lists the commands)\n", verb,
                near);
    else if (verb[0] == '-')
        fprintf(stderr, "tpaudit: unknown option '%s' (tpaudit --help lists the commands)\n", verb);
    else
        fprintf(stderr, "tpaudit: unknown command '%s' (tpaudit --help lists the commands)\n", verb);
    return TPA_EXIT_USAGE;
}
