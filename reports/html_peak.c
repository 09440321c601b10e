/* html_peak.c - a rank's peak of activations in the HTML report, under its
 * memory ledger: the audit where what the step saved for backward added up
 * to the most, and a bar per module that made it (the deepest module, the
 * most bytes first) with its share of the peak, the bars scaled to the
 * largest module (ANALYZER.md, "The peak of activations"); then, where the
 * probe replayed the allocator's history, what held the memory at the
 * peak's moment, a bar per owner (ANALYZER.md, "The moment of the peak"). */
#include "html_page.h"

#include <inttypes.h>
#include <stdio.h>

static void html_put_moment(FILE *out, const tpa_run_t *run);

void html_put_peak(FILE *out, const tpa_run_t *run) {
    if (!run->has_peak) return;
    char bytes[32], step[48] = "";
    tpa_format_bytes(run->peak_bytes, bytes, sizeof bytes);
    if (run->peak_step >= 0) snprintf(step, sizeof step, " (step %" PRId64 ")", run->peak_step);
    html_fmt(out,
             "<table class=\"libs peak\"><caption>Peak of activations at audit \"%s\"%s: %s saved for backward, by "
             "the module that made it</caption>\n<thead><tr><th>module</th><th class=\"num\">bytes</th>"
             "<th class=\"num\">share</th><th></th></tr></thead><tbody>\n",
             run->peak_label ? run->peak_label : "?", step, bytes);
    int64_t total = run->peak_bytes > 0 ? run->peak_bytes : 1;
    int64_t largest = run->n_peak_modules && run->peak_modules[0].bytes > 0 ? run->peak_modules[0].bytes : 1;
    for (size_t i = 0; i < run->n_peak_modules; i++) {
        const tpa_peak_module_t *m = &run->peak_modules[i];
        double share = (double)m->bytes / (double)total, bar = (double)m->bytes / (double)largest;
        html_fmt(out, "<tr><td><code>%s</code></td><td class=\"num\">", m->module[0] ? m->module : "(the model)");
        html_put_bytes(out, m->bytes);
        fprintf(out, "</td><td class=\"num\">%.0f%%</td><td><span class=\"libbar\" style=\"width:%.0fpx\"></span>"
                     "</td></tr>\n",
                100.0 * share, m->bytes > 0 ? 1 + 200.0 * bar : 0.0);
    }
    fputs("</tbody></table>\n", out);
    html_put_moment(out, run);
}

static void html_put_moment(FILE *out, const tpa_run_t *run) {
    if (run->moment_bytes <= 0) return;
    char bytes[32], words[400], step[32];
    tpa_format_bytes(run->moment_bytes, bytes, sizeof bytes);
    snprintf(step, sizeof step, "%" PRId64, run->moment_step);
    html_fmt(out, /* (html_fmt knows %s only) */
             "<table class=\"libs peak moment\"><caption>At the peak's moment in step %s (the allocator's "
             "history replayed): %s allocated, by owner</caption>\n<thead><tr><th>owner</th><th class=\"num\">bytes"
             "</th><th class=\"num\">share</th><th></th></tr></thead><tbody>\n",
             step, bytes);
    int64_t largest = 1;
    for (size_t i = 0; i < run->n_moment_parts; i++)
        if (run->moment_parts[i].bytes > largest) largest = run->moment_parts[i].bytes;
    for (size_t i = 0; i < run->n_moment_parts; i++) {
        const tpa_moment_part_t *p = &run->moment_parts[i];
        tpa_moment_part_words(p, words, sizeof words);
        html_fmt(out, "<tr><td><code>%s</code></td><td class=\"num\">", words);
        html_put_bytes(out, p->bytes);
        fprintf(out, "</td><td class=\"num\">%.0f%%</td><td><span class=\"libbar\" style=\"width:%.0fpx\"></span>"
                     "</td></tr>\n",
                100.0 * (double)p->bytes / (double)run->moment_bytes, 1 + 200.0 * (double)p->bytes / (double)largest);
    }
    fputs("</tbody></table>\n", out);
}
