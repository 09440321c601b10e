/* cmd_report.c - `tpaudit report`: renders databases as text, JSON, HTML or
 * JUnit, the format given by --format, else by the -o file's suffix (.json,
 * .html/.htm, .xml), else text. Exit 0 when it rendered (an incomplete run
 * is said in the report), 2 on bad usage or unreadable input. */
#include "analyzer.h"
#include "verbs.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static void usage(FILE *out) {
    fputs("usage: tpaudit report [--format text|json|html|junit] [-o FILE] PATH...\n"
          "  PATH is a database or a directory of them (all ranks are merged).\n"
          "  -f, --format   output format (default: from the -o suffix .json, .html, .xml\n"
          "                 (junit), else text)\n"
          "  -o, --output   write to FILE instead of stdout (a regular file is replaced only\n"
          "                 when rendering succeeded; a device or FIFO is written in place)\n",
          out);
}

/* The format an output file's name asks for: .json, .html/.htm, .xml
 * (JUnit), else text (no file, .txt, any other name, a bare ".json"). */
static const char *format_of_name(const char *output) {
    static const char *const by_suffix[][2] = {
        {".json", "json"}, {".html", "html"}, {".htm", "html"}, {".xml", "junit"}};
    size_t len = output ? strlen(output) : 0;
    for (size_t i = 0; i < sizeof by_suffix / sizeof by_suffix[0]; i++) {
        size_t sl = strlen(by_suffix[i][0]);
        if (len > sl && output[len - sl - 1] != '/' && !strcasecmp(output + len - sl, by_suffix[i][0]))
            return by_suffix[i][1];
    }
    return "text";
}

int tpa_cmd_report(int argc, char **argv) {
    static const struct option opts[] = {{"format", required_argument, 0, 'f'},
                                         {"output", required_argument, 0, 'o'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *format = NULL, *output = NULL;
    int c;
    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":f:o:h", opts, NULL)) != -1) {
        if (c == 'f')
            format = optarg;
        else if (c == 'o')
            output = optarg;
        else
            return tpa_option_help_or_error("report", c, argv, usage);
    }
    if (!format) format = format_of_name(output);
    int (*render)(const tpa_report_t *, FILE *) = NULL;
    if (!strcmp(format, "text"))
        render = tpa_render_text;
    else if (!strcmp(format, "json"))
        render = tpa_render_json;
    else if (!strcmp(format, "html"))
        render = tpa_render_html;
    else if (!strcmp(format, "junit"))
        render = tpa_render_junit;
    else {
        fprintf(stderr, "tpaudit: unknown format '%s' (text, json, html or junit)\n", tpa_term(format));
        return TPA_EXIT_USAGE;
    }
    if (optind >= argc) {
        fputs("tpaudit: report: no PATH given (see tpaudit report --help)\n", stderr);
        return TPA_EXIT_USAGE;
    }
    char why[8400] = "";
    tpa_report_t report;
    /* The text shows the details of one finding per group of the same finding on several
     * ranks, and memory by library, not the plot's audit points. */
    int needs = render == tpa_render_text ? TPA_NEED_MEMORY | TPA_NEED_LEAD_DETAILS : TPA_NEED_ALL;
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
