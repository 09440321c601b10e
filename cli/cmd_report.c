/* cmd_report.c - `tpaudit report`: renders databases as text, JSON, HTML,
 * JUnit or PyTorch's memory snapshot (cmd_memviz.c), the format given by
 * --format, else by the -o file's suffix (.json, .html/.htm, .xml,
 * .pickle), else text. Exit 0 when it rendered (an incomplete run is said
 * in the report), 2 on bad usage or unreadable input. */
#include "analyzer.h"
#include "verbs.h"

#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void usage(FILE *out) {
    fputs("usage: tpaudit report [--format text|json|html|junit|memory-viz] [-o FILE] PATH...\n"
          "  PATH is a database or a directory of them (all ranks are merged).\n"
          "  -f, --format   output format (default: from the -o suffix .json, .html, .xml\n"
          "                 (junit), .pickle (memory-viz), else text)\n"
          "  -o, --output   write to FILE instead of stdout (a regular file is replaced only\n"
          "                 when rendering succeeded; a device or FIFO is written in place)\n"
          "memory-viz (PyTorch's memory snapshot, one file per rank: FILE.rank<N>.pickle):\n"
          "  --rank N         only rank N\n"
          "  --steps A:B      only the steps A to B (A: or :B leave one end open)\n"
          "  --max-events N   keep the newest N trace entries per device (default 100000, 0: all)\n",
          out);
}

/* The format an output file's name asks for: .json, .html/.htm, .xml
 * (JUnit), else text (no file, .txt, any other name, a bare ".json"). */
static const char *format_of_name(const char *output) {
    static const char *const by_suffix[][2] = {
        {".json", "json"}, {".html", "html"}, {".htm", "html"}, {".xml", "junit"}, {".pickle", "memory-viz"}};
    size_t len = output ? strlen(output) : 0;
    for (size_t i = 0; i < sizeof by_suffix / sizeof by_suffix[0]; i++) {
        size_t sl = strlen(by_suffix[i][0]);
        if (len > sl && output[len - sl - 1] != '/' && !strcasecmp(output + len - sl, by_suffix[i][0]))
            return by_suffix[i][1];
    }
    return "text";
}

/* A whole number in [0, INT64_MAX] from all of text. */
static int parse_count(const char *text, int64_t *out) {
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 10);
    if (!*text || *end || errno || v < 0) return -1;
    *out = v;
    return 0;
}

/* --steps A:B, A:, :B or N (one step). */
static int parse_steps(const char *text, tpa_memviz_options_t *o) {
    const char *colon = strchr(text, ':');
    char first[32];
    if (!colon) {
        if (parse_count(text, &o->first_step)) return -1;
        o->last_step = o->first_step;
        return 0;
    }
    if ((size_t)(colon - text) >= sizeof first) return -1;
    memcpy(first, text, (size_t)(colon - text));
    first[colon - text] = 0;
    if (first[0] && parse_count(first, &o->first_step)) return -1;
    if (colon[1] && parse_count(colon + 1, &o->last_step)) return -1;
    return o->first_step > o->last_step ? -1 : 0;
}

/* The renderer of a format; NULL for memory-viz (cmd_memviz.c) and unknown ones. */
static int (*renderer_of(const char *format))(const tpa_report_t *, FILE *) {
    static const struct {
        const char *name;
        int (*render)(const tpa_report_t *, FILE *);
    } formats[] = {{"text", tpa_render_text}, {"json", tpa_render_json}, {"html", tpa_render_html},
                   {"junit", tpa_render_junit}};
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
        if (!strcmp(format, formats[i].name)) return formats[i].render;
    return NULL;
}

enum { OPT_RANK = 256, OPT_STEPS, OPT_MAX_EVENTS };

/* --rank, --steps, --max-events into viz and *rank; 0, or -1 after saying why. */
static int viz_option(int c, const char *value, tpa_memviz_options_t *viz, int64_t *rank) {
    int64_t max_events = 0;
    int bad = c == OPT_RANK    ? parse_count(value, rank)
              : c == OPT_STEPS ? parse_steps(value, viz)
                               : parse_count(value, &max_events);
    if (c == OPT_MAX_EVENTS) viz->max_events = (size_t)max_events;
    if (bad)
        fprintf(stderr, "tpaudit: report: bad value '%s' for %s (see tpaudit report --help)\n", tpa_term(value),
                c == OPT_RANK ? "--rank" : c == OPT_STEPS ? "--steps" : "--max-events");
    return bad ? -1 : 0;
}

int tpa_cmd_report(int argc, char **argv) {
    static const struct option opts[] = {{"format", required_argument, 0, 'f'},
                                         {"output", required_argument, 0, 'o'},
                                         {"rank", required_argument, 0, OPT_RANK},
                                         {"steps", required_argument, 0, OPT_STEPS},
                                         {"max-events", required_argument, 0, OPT_MAX_EVENTS},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *format = NULL, *output = NULL, *viz_only = NULL;
    tpa_memviz_options_t viz = {INT64_MIN, INT64_MAX, 100000};
    int64_t rank = -1;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:o:h", opts, NULL)) != -1) {
        if (c == 'f')
            format = optarg;
        else if (c == 'o')
            output = optarg;
        else if (c == OPT_RANK || c == OPT_STEPS || c == OPT_MAX_EVENTS) {
            viz_only = argv[optind - 1];
            if (viz_option(c, optarg, &viz, &rank)) return TPA_EXIT_USAGE;
        } else
            return tpa_option_help_or_error("report", c, argv, usage);
    }
    if (!format) format = format_of_name(output);
    int (*render)(const tpa_report_t *, FILE *) = renderer_of(format);
    if (!render && strcmp(format, "memory-viz")) {
        fprintf(stderr, "tpaudit: unknown format '%s' (text, json, html, junit or memory-viz)\n", tpa_term(format));
        return TPA_EXIT_USAGE;
    }
    if (viz_only && render) {
        fprintf(stderr, "tpaudit: report: %s is an option of --format memory-viz only\n", tpa_term(viz_only));
        return TPA_EXIT_USAGE;
    }
    if (optind >= argc) {
        fputs("tpaudit: report: no PATH given (see tpaudit report --help)\n", stderr);
        return TPA_EXIT_USAGE;
    }
    if (!render) return tpa_report_memviz(argc - optind, argv + optind, output, &viz, rank >= 0, rank);
    char why[8400] = "";
    tpa_report_t report;
    /* The text shows the details of one finding per group of the same finding on several
     * ranks, and memory by library, not the plot's audit points. */
    int needs = render == tpa_render_text   ? TPA_NEED_MEMORY | TPA_NEED_LEAD_DETAILS
                : render == tpa_render_html ? TPA_NEED_ALL | TPA_NEED_OWNERS
                                            : TPA_NEED_ALL;
    if (tpa_load_or_say_for(argc - optind, argv + optind, 0, needs, &report)) {
        tpa_report_free(&report);
        return TPA_EXIT_USAGE;
    }
    if (tpa_write_output(output, render, &report, why, sizeof why)) {
        fprintf(stderr, "tpaudit: %s\n", tpa_term(why));
        tpa_report_free(&report);
        return TPA_EXIT_USAGE;
    }
    tpa_report_free(&report);
    return TPA_EXIT_OK;
}
