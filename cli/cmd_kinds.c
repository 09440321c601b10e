/* cmd_kinds.c - `tpaudit kinds`: the finding kinds the analyzer reports, one
 * line each (name, severity, summary), printed from the table of finding
 * kinds (rules/finding_kinds.c), the one list the docs point to.  Exit 0,
 * 2 on bad usage. */
#include "analyzer.h"
#include "finding_kinds.h"
#include "verbs.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *out) {
    fputs("usage: tpaudit kinds\n"
          "  Lists the finding kinds a report can hold: name, severity and what it means.\n"
          "exit: 0, 2 usage\n",
          out);
}

/* The width of the name column, or (severity) of the severity column. */
static int widest(int severity) {
    size_t w = severity ? strlen("severity") : strlen("kind");
    for (size_t k = 0; k < tpa_n_kinds; k++) {
        const char *s = severity ? tpa_kind_severity_text(&tpa_kinds[k]) : tpa_kinds[k].name;
        if (strlen(s) > w) w = strlen(s);
    }
    return (int)w;
}

int tpa_cmd_kinds(int argc, char **argv) {
    static const struct option opts[] = {{"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    int c;
    optind = 1;
    opterr = 0;
    if ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) return tpa_option_help_or_error("kinds", c, argv, usage);
    if (optind < argc) {
        fprintf(stderr, "tpaudit: kinds: takes no arguments, got '%s' (see tpaudit kinds --help)\n", argv[optind]);
        return TPA_EXIT_USAGE;
    }
    int name_w = widest(0), severity_w = widest(1);
    printf("%-*s  %-*s  %s\n", name_w, "kind", severity_w, "severity", "meaning");
    for (size_t k = 0; k < tpa_n_kinds; k++)
        printf("%-*s  %-*s  %s\n", name_w, tpa_kinds[k].name, severity_w, tpa_kind_severity_text(&tpa_kinds[k]),
               tpa_kinds[k].summary);
    return fflush(stdout) == 0 && !ferror(stdout) ? TPA_EXIT_OK : TPA_EXIT_USAGE;
}
