/* main.c - the tpaudit command line: dispatches to run, report, gate, diff. */
#include "analyzer.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out) {
    fputs("usage: tpaudit <command> [options]\n"
          "  run [-o DIR] [--] CMD...      run CMD under the shim, one database per process\n"
          "  report [--format F] PATH...   text, json, html or junit report\n"
          "  gate [options] PATH...        CI gate on retained memory and findings\n"
          "  diff OLD NEW                  findings that appeared, disappeared or grew\n"
          "  <command> --help              options of a command\n"
          "exit: 0 clean/passed, 1 gate failed, 2 usage or bad input, 3 inconclusive\n",
          out);
}

int main(int argc, char **argv) {
    if (argc < 2) { usage(stderr); return TPA_EXIT_USAGE; }
    const char *verb = argv[1];
    if (!strcmp(verb, "run")) return tpa_cmd_run(argc - 1, argv + 1);
    if (!strcmp(verb, "report")) return tpa_cmd_report(argc - 1, argv + 1);
    if (!strcmp(verb, "gate")) return tpa_cmd_gate(argc - 1, argv + 1);
    if (!strcmp(verb, "diff")) return tpa_cmd_diff(argc - 1, argv + 1);
    if (!strcmp(verb, "-h") || !strcmp(verb, "--help") || !strcmp(verb, "help")) { usage(stdout); return TPA_EXIT_OK; }
    if (!strcmp(verb, "--version")) { puts("tpaudit 0.1.0"); return TPA_EXIT_OK; }
    fprintf(stderr, "tpaudit: unknown command '%s'\n", verb);
    usage(stderr);
    return TPA_EXIT_USAGE;
}
