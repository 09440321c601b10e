/* finding_message.c - a finding's one-line message, from its kind's
 * template in the table of finding kinds (rules/finding_kinds.c). */
#include "findings.h"
#include "frames.h"

#include <stdio.h>
#include <string.h>

typedef struct text_buf {
    char v[1024];
    size_t used;
} text_buf_t;

/* Appends like snprintf into what is left (a NULL string reads "(null)"). */
static void put(text_buf_t *b, const char *s) {
    if (b->used + 1 >= sizeof b->v) return;
    int n = snprintf(b->v + b->used, sizeof b->v - b->used, "%s", s ? s : "(null)");
    b->used += (size_t)n < sizeof b->v - b->used ? (size_t)n : sizeof b->v - 1 - b->used;
}

/* " (train.py:18)": the user's line that made the newest tensor kept, when known. */
static void put_created(text_buf_t *b, const tpa_finding_t *f) {
    const tpa_frame_t *at = tpa_first_user_frame(&f->created_at);
    if (!at || !at->file) return;
    char where[300];
    snprintf(where, sizeof where, " (%s:%ld)", tpa_base_name(at->file), at->line);
    put(b, where);
}

/* One element kept, from the ledger's example "[4,256] float32 cuda:0, with
 * grad_fn": "a [4,256] float32 tensor with its graph"; "tensors" when unknown. */
static void put_kept(text_buf_t *b, const char *example) {
    char shape[200] = "", dtype[64] = "", kept[320];
    if (!example || example[0] != '[' || sscanf(example, "%199s %63[^ ,]", shape, dtype) < 1) {
        put(b, example ? example : "tensors"); /* a library's "device memory" */
        return;
    }
    snprintf(kept, sizeof kept, "a %s%s%s tensor%s", shape, dtype[0] ? " " : "", dtype,
             strstr(example, "grad_fn") ? " with its graph" : "");
    put(b, kept);
}

static void put_field(text_buf_t *b, const char *field, size_t len, const tpa_finding_t *f, const tpa_kind_t *k) {
    char bytes[32], state[96] = "";
#define IS(w) (len == sizeof w - 1 && !memcmp(field, w, len))
    if (IS("holder"))
        put(b, f->holder_class ? f->holder_class : k->holder_fallback);
    else if (IS("path"))
        put(b, f->holder_path ? f->holder_path : "");
    else if (IS("name"))
        put(b, f->name ? f->name : "(unnamed)");
    else if (IS("shape"))
        put(b, f->shape);
    else if (IS("retained")) {
        tpa_format_bytes(f->retained_bytes, bytes, sizeof bytes);
        put(b, bytes);
    } else if (IS("state") && f->state_bytes > 0) {
        tpa_format_bytes(f->state_bytes, bytes, sizeof bytes);
        snprintf(state, sizeof state, ", plus %s of its %s", bytes,
                 k->state_words ? k->state_words : "optimizer state");
        put(b, state);
    } else if (IS("successor") && f->has_successor) {
        put(b, "; live successor ");
        put(b, f->succ_name);
        put(b, " is never trained");
    } else if (IS("successor"))
        put(b, "; no live successor");
    else if (IS("replaced") && f->is_error)
        put(b, " (it replaced a tensor the optimizer still holds)");
    else if (IS("created"))
        put_created(b, f);
    else if (IS("kept"))
        put_kept(b, f->example);
    else if (IS("rate")) {
        tpa_format_bytes(f->growth_per_step, bytes, sizeof bytes);
        put(b, bytes);
    }
#undef IS
}

char *tpa_finding_message(const tpa_finding_t *f, const tpa_kind_t *k) {
    text_buf_t b = {.used = 0};
    b.v[0] = 0;
    for (const char *p = k->message; *p;) {
        const char *close = *p == '{' ? strchr(p, '}') : NULL;
        if (close) {
            put_field(&b, p + 1, (size_t)(close - p - 1), f, k);
            p = close + 1;
            continue;
        }
        size_t n = strcspn(p + 1, "{") + 1;
        char chunk[256];
        if (n >= sizeof chunk) n = sizeof chunk - 1;
        memcpy(chunk, p, n);
        chunk[n] = 0;
        put(&b, chunk);
        p += n;
    }
    return tpa_strdup(b.v);
}
