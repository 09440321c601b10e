/*
 * html_stack.c - stacks as a reader wants them: the user's own frames
 * first, the frames of installed packages (site-packages), the standard
 * library, the interpreter and system libraries folded into <details>
 * (but the framework frame that made the call, shown with the user's), and
 * paths shown relative to the project root; which frame is whose and the
 * root are decided in stack_view.c, shared with the text report.
 */
#include "html_page.h"

#include <string.h>

void html_put_frame(FILE *out, const html_paths_t *p, const tpa_frame_t *f) {
    const char *path = f->file ? f->file : f->module;
    fputs("<span class=\"frame\" title=\"", out);
    html_put(out, path);
    fputs("\"><code>", out);
    if (f->file) {
        html_put(out, tpa_short_path(p, f->file));
        fprintf(out, ":%ld</code> in <b>", f->line);
        html_put(out, f->function ? f->function : "?");
        fputs("</b>", out);
    } else {
        html_put(out, f->function ? f->function : "??");
        fputs("</code> (", out);
        html_put(out, path ? tpa_base_name(path) : "?");
        fprintf(out, "+0x%llx)", (unsigned long long)f->address);
    }
    fputs("</span>", out);
}

static void put_item(FILE *out, const html_paths_t *p, const tpa_frame_t *f) {
    fprintf(out, "<li class=\"%s\">", tpa_frame_is_user(f) ? "user" : "lib");
    html_put_frame(out, p, f);
    fputs("</li>\n", out);
}

void html_put_stack(FILE *out, const html_paths_t *p, const char *title, const tpa_frames_t *fr) {
    if (!fr->n) return;
    size_t users = 0;
    for (size_t i = 0; i < fr->n; i++) users += tpa_frame_is_user(&fr->v[i]);
    /* shown first: the user's frames (or the innermost three when none is),
     * and the framework frames that made the call (stack_view.h) */
    size_t shown = 0;
    fputs("<div class=\"stack\"><h4>", out);
    html_put(out, title);
    fputs("</h4>\n<ol class=\"frames\">\n", out);
    for (size_t i = 0; i < fr->n; i++) {
        if (tpa_frame_made_the_call(fr, i) || (users ? tpa_frame_is_user(&fr->v[i]) : i < 3)) {
            put_item(out, p, &fr->v[i]);
            shown++;
        }
    }
    fputs("</ol>\n", out);
    if (shown < fr->n) {
        fprintf(
            out,
            "<details><summary>show all %zu frames (%zu in libraries folded)</summary>\n<ol class=\"frames all\">\n",
            fr->n, fr->n - shown);
        for (size_t i = 0; i < fr->n; i++) put_item(out, p, &fr->v[i]);
        fputs("</ol></details>\n", out);
    }
    fputs("</div>\n", out);
}
