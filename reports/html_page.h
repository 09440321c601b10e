/*
 * html_page.h - the pieces of the HTML report (report_html.c assembles
 * them): HTML escaping, stack folding with project-relative paths, the
 * inline SVG plots and the memory-by-library table. Internal to reports/.
 */
#ifndef HTML_PAGE_H
#define HTML_PAGE_H

#include "stack_view.h"
#include "reports.h"

/* Writes s escaped for HTML text and attribute values: & < > " ' become
 * entities; invalid UTF-8, control characters (but tab and newline),
 * bidirectional controls and noncharacters become U+FFFD. NULL writes
 * nothing. */
void html_put(FILE *out, const char *s);
/* The same for the first n bytes of s. */
void html_put_n(FILE *out, const char *s, size_t n);
/* Writes fmt, markup written as it is, with each %s replaced by its
 * string argument escaped by html_put (NULL: nothing); %% is '%'. */
void html_fmt(FILE *out, const char *fmt, ...);

/* The run's argv (a JSON array of strings) parsed; NULL when it is not one.
 * Free with html_argv_free. */
char **html_argv_parse(const char *json, size_t *n);
void html_argv_free(char **argv, size_t n);
/* argv as one shell-like, escaped line. */
void html_put_argv(FILE *out, const char *json);
/* "rank 3", or "pid 1234" for a process without a rank. */
void html_put_run_name(FILE *out, const tpa_run_t *run);
/* A byte count as tpa_format_bytes writes it ("147.2 MiB"). */
void html_put_bytes(FILE *out, int64_t bytes);

/* Stack folding and project-relative paths follow stack_view.c, the rules
 * the text report uses too. */
typedef tpa_paths_t html_paths_t;
static inline int html_paths_init(html_paths_t *p, const tpa_report_t *r) { return tpa_paths_init(p, r); }
static inline void html_paths_free(html_paths_t *p) { tpa_paths_free(p); }
static inline const tpa_frame_t *html_first_user_frame(const tpa_frames_t *fr) { return tpa_first_user_frame(fr); }
/* One frame "path:line in function" with the path shortened; the full path
 * is in the title attribute. */
void html_put_frame(FILE *out, const html_paths_t *p, const tpa_frame_t *f);
/* A titled stack: the user's frames, then the folded rest in <details>. */
void html_put_stack(FILE *out, const html_paths_t *p, const char *title, const tpa_frames_t *fr);

/* The plots' geometry (html_plot.c draws them; html_growth.c too). */
enum { PLOT_W = 640, PLOT_H = 230, LEFT = 70, RIGHT = 14, TOP = 26, BOTTOM = 40, CHAR_W = 7 };
#define INNER_W ((double)(PLOT_W - LEFT - RIGHT))
#define INNER_H ((double)(PLOT_H - TOP - BOTTOM))

/* A byte axis: its top value, tick spacing and the unit its labels count in. */
typedef struct html_axis {
    double top;
    double step;
    double unit;
    const char *unit_name;
} html_axis_t;

html_axis_t html_bytes_axis(int64_t max);
double html_y_of(const html_axis_t *a, double v);
void html_svg_open(FILE *out, const char *cls, const char *label);
/* The y axis: gridlines and labels in the axis' unit, and its title. */
void html_put_y_axis(FILE *out, const html_axis_t *a, const char *title);
/* Where a label of text centred at x goes, kept inside the plot. */
double html_label_x(double x, const char *text, double *half);
/* A label centred at x unless it would overlap the previous one (right
 * edge *right) or pass limit; whether it was drawn. */
int html_put_x_label(FILE *out, double x, double y, const char *cls, const char *text, double *right, double limit);

/* A growth run's plot (html_growth.c): the per-step samples, the holder's
 * bytes at each audit over them, warm-up and the step growth was first
 * suspected marked; nothing when the run has no samples. */
void html_put_growth_plot(FILE *out, const tpa_run_t *run);
/* A growth run whose audits found no stale bytes: its growth plot stands
 * instead of a stale-bytes plot of zeros. */
int html_growth_without_stale(const tpa_run_t *run);

/* Scales shared by every rank's plots. */
typedef struct html_scale {
    int64_t t0_ns, t1_ns; /* memory plots' time range, over all ranks */
    int64_t mem_max;      /* memory plots' y maximum */
    int64_t stale_max;    /* stale-bytes plots' y maximum */
    int64_t *steps;       /* audit steps of all ranks, ascending, exit (-1) last */
    size_t n_steps;
    int any_memory; /* a run has allocation records */
} html_scale_t;

int html_scale_init(html_scale_t *s, const tpa_report_t *r);
void html_scale_free(html_scale_t *s);
/* Device memory over time with the audit points marked (runs with
 * allocation records only). */
void html_put_memory_plot(FILE *out, const html_scale_t *s, const tpa_run_t *run);
/* Stale bytes at each audit step (every run with an audit). */
void html_put_stale_plot(FILE *out, const html_scale_t *s, const tpa_run_t *run);

/* The device-memory-by-library section over the runs shown (indices into
 * r->runs, in the page's order; html_libraries.c): 0, or -1 out of memory. */
int html_put_memory_by_library(FILE *out, const tpa_report_t *r, const size_t *runs, size_t n_runs);

/* Run run_index's owner timeline: memory by owner kind, stacked, over its
 * audits and step samples, findings marked (nothing without one;
 * html_owners.c). */
void html_put_owner_timeline(FILE *out, const tpa_report_t *r, size_t run_index);

/* A run's memory ledger as a table (nothing when it has none; html_ledger.c). */
void html_put_ledger(FILE *out, const tpa_run_t *run);

/* A run's peak of activations as a bar per module (nothing when it has
 * none; html_peak.c). */
void html_put_peak(FILE *out, const tpa_run_t *run);

/* The stylesheet (reports/html/report.css, embedded at build time). */
extern const char html_stylesheet[];

#endif
