/* options.c - what the verbs share on the command line (options.h):
 * parsing SIZE arguments and answering --help or a bad option. */
#include "options.h"

#include "escape.h"

#include <ctype.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

int tpa_parse_size(const char *text, int64_t *bytes) {
    static const struct {
        const char *unit;
        double scale;
    } UNITS[] = {{"", 1},
                 {"B", 1},
                 {"KiB", 1024.0},
                 {"MiB", 1048576.0},
                 {"GiB", 1073741824.0},
                 {"TiB", 1099511627776.0},
                 {"KB", 1e3},
                 {"MB", 1e6},
                 {"GB", 1e9},
                 {"TB", 1e12},
                 {"K", 1024.0},
                 {"M", 1048576.0},
                 {"G", 1073741824.0},
                 {"T", 1099511627776.0}};
    const char *p = text;
    while (isspace((unsigned char)*p)) p++;
    /* a decimal number only (strtod alone would also take inf, nan and hex) */
    const char *q = p;
    int digits = 0;
    while (isdigit((unsigned char)*q)) q++, digits++;
    if (*q == '.')
        for (q++; isdigit((unsigned char)*q); q++) digits++;
    if (!digits) return -1;
    if ((*q == 'e' || *q == 'E') &&
        (isdigit((unsigned char)q[1]) || ((q[1] == '+' || q[1] == '-') && isdigit((unsigned char)q[2])))) {
        q += 2;
        while (isdigit((unsigned char)*q)) q++;
    }
    char *end;
    double v = strtod(p, &end);
    if (end != q || !isfinite(v) || v < 0) return end == q && !isfinite(v) ? -2 : -1;
    while (isspace((unsigned char)*end)) end++;
    for (size_t i = 0; i < sizeof UNITS / sizeof *UNITS; i++)
        if (!strcasecmp(end, UNITS[i].unit)) {
            double b = v * UNITS[i].scale + 0.5;
            if (!(b < 9.2e18)) return -2; /* beyond int64 */
            *bytes = (int64_t)b;
            return 0;
        }
    return -1;
}

int tpa_option_help_or_error(const char *verb, int c, char **argv, void (*usage)(FILE *)) {
    if (c == 'h') {
        usage(stdout);
        return TPA_EXIT_OK;
    }
    const char *arg = optind > 0 ? argv[optind - 1] : "";
    if (c == ':')
        fprintf(stderr, "tpaudit: %s: option '%s' needs a value (see tpaudit %s --help)\n", verb, tpa_term(arg), verb);
    else if (optopt && optopt != '?')
        fprintf(stderr, "tpaudit: %s: unknown option '-%c' (see tpaudit %s --help)\n", verb, optopt, verb);
    else
        fprintf(stderr, "tpaudit: %s: unknown option '%s' (see tpaudit %s --help)\n", verb, tpa_term(arg), verb);
    return TPA_EXIT_USAGE;
}
