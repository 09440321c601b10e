/* html_ledger.c - a rank's memory ledger in the HTML report, under its
 * memory plot: who owns each live byte at the judged audit (parameters,
 * gradients, optimizer state, stale tensors, objects that hold tensors,
 * the autograd graph, the allocator's cache, other libraries) and what is
 * unattributed, each with a bar against the measured total. */
#include "html_page.h"

#include <inttypes.h>
#include <string.h>

void html_put_ledger(FILE *out, const tpa_run_t *run) {
    if (!run->has_ledger) return;
    fputs("<table class=\"libs ledger\"><caption>Memory ledger at ", out);
    if (run->headline_label)
        html_fmt(out, "audit \"%s\"", run->headline_label);
    else if (run->ledger_step >= 0)
        fprintf(out, "step %" PRId64, run->ledger_step);
    else
        fputs("exit", out);
    fputs(": ", out);
    html_put_bytes(out, run->ledger_total);
    fputs(" measured</caption>\n<thead><tr><th>owner</th><th>held by</th><th class=\"num\">bytes</th>"
          "<th class=\"num\">tensors</th><th>one of them</th><th></th></tr></thead><tbody>\n",
          out);
    int64_t total = run->ledger_total > 0 ? run->ledger_total : 1;
    for (size_t i = 0; i < run->n_ledger; i++) {
        const tpa_ledger_row_t *row = &run->ledger[i];
        html_fmt(out, "<tr><td>%s</td><td><code>%s</code></td><td class=\"num\">", row->owner_kind,
                 row->owner ? row->owner : "");
        html_put_bytes(out, row->bytes);
        fprintf(out, "</td><td class=\"num\">%" PRId64 "</td><td>", row->tensors);
        html_put(out, row->example ? row->example : row->device);
        fprintf(out, "</td><td><span class=\"libbar\" style=\"width:%.0fpx\"></span></td></tr>\n",
                row->bytes > 0 ? 1 + 200.0 * (double)row->bytes / (double)total : 0.0);
    }
    fputs("</tbody></table>\n", out);
}
