/*
 * report_memviz.c - a run as PyTorch's memory snapshot, the pickle that
 * memory_viz (MemoryViz.js) and torch.cuda._memory_viz open:
 * {"segments": [...], "device_traces": [[...], ...], "tpaudit": {...}}.
 * The replay (memviz_trace.c) gives the entries and the segments live at
 * the end; this file writes them.  Each entry's `category` is its owner
 * kind and `user_metadata` what tpaudit knows of it; frames lists and the
 * recurring strings are written once and referred to after (the pickle's
 * memo).  docs/MEMVIZ.md has the mapping.
 */
#include "memviz.h"
#include "pickle_write.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

typedef struct writer {
    tpa_pickle_t pk;
    const mv_trace_t *t;
    int64_t *frames_memo; /* per frames-table entry, -1 until written */
    const char **str_keys; /* recurring strings written so far, with their memo ids */
    uint32_t *str_ids;
    size_t n_str, cap_str;
} writer_t;

/* A recurring string (a key, an action, a category): memoized on first use. */
static void str(writer_t *w, const char *s) {
    if (!s) {
        tpa_pickle_none(&w->pk);
        return;
    }
    for (size_t i = 0; i < w->n_str; i++)
        if (w->str_keys[i] == s || !strcmp(w->str_keys[i], s)) {
            tpa_pickle_get(&w->pk, w->str_ids[i]);
            return;
        }
    tpa_pickle_str(&w->pk, s);
    if (w->n_str == w->cap_str || w->n_str >= 256) {
        if (w->n_str >= 256) return; /* enough: the rest are written out */
        size_t n = w->cap_str ? w->cap_str * 2 : 32;
        const char **k = realloc(w->str_keys, n * sizeof *k);
        if (!k) return;
        w->str_keys = k;
        uint32_t *ids = realloc(w->str_ids, n * sizeof *ids);
        if (!ids) return;
        w->str_ids = ids;
        w->cap_str = n;
    }
    w->str_keys[w->n_str] = s;
    w->str_ids[w->n_str++] = tpa_pickle_memoize(&w->pk);
}

static void key_int(writer_t *w, const char *key, int64_t v) {
    str(w, key);
    tpa_pickle_int(&w->pk, v);
}

static void key_str(writer_t *w, const char *key, const char *v) {
    str(w, key);
    str(w, v);
}

/* [{"filename", "line", "name"}, ...] of frames-table entry i ([] for -1), once. */
static void frames(writer_t *w, int64_t i) {
    if (i < 0 || (size_t)i >= w->t->n_frames) {
        tpa_pickle_list(&w->pk);
        tpa_pickle_close(&w->pk);
        return;
    }
    if (w->frames_memo[i] >= 0) {
        tpa_pickle_get(&w->pk, (uint32_t)w->frames_memo[i]);
        return;
    }
    const tpa_frames_t *f = w->t->frames[i];
    tpa_pickle_list(&w->pk);
    for (size_t k = 0; k < f->n; k++) {
        const tpa_frame_t *fr = &f->v[k];
        char name[300];
        if (!fr->function) {
            const char *base = fr->module ? strrchr(fr->module, '/') : NULL;
            snprintf(name, sizeof name, "%s+0x%" PRIx64, base ? base + 1 : fr->module ? fr->module : "?", fr->address);
        }
        tpa_pickle_dict(&w->pk);
        str(w, "filename");
        tpa_pickle_str(&w->pk, fr->file ? fr->file : fr->module ? fr->module : "??");
        key_int(w, "line", fr->line > 0 ? fr->line : 0);
        str(w, "name");
        tpa_pickle_str(&w->pk, fr->function ? fr->function : name);
        tpa_pickle_close(&w->pk);
    }
    tpa_pickle_close(&w->pk);
    w->frames_memo[i] = tpa_pickle_memoize(&w->pk);
}

static void put_entry(writer_t *w, const mv_entry_t *e) {
    tpa_pickle_dict(&w->pk);
    key_str(w, "action", e->action);
    key_int(w, "addr", e->addr);
    key_int(w, "size", e->size);
    key_int(w, "stream", e->stream);
    key_int(w, "time_us", e->time_us);
    str(w, "frames");
    frames(w, e->frames);
    if (e->category) key_str(w, "category", e->category);
    if (e->meta) {
        str(w, "user_metadata");
        tpa_pickle_str(&w->pk, e->meta);
    }
    if (!strcmp(e->action, "oom")) key_int(w, "device_free", e->device_free > 0 ? e->device_free : 0);
    tpa_pickle_close(&w->pk);
}

static void put_block(writer_t *w, int64_t addr, int64_t size, const char *state, int64_t frames_i) {
    tpa_pickle_dict(&w->pk);
    key_int(w, "address", addr);
    key_int(w, "size", size);
    key_str(w, "state", state);
    if (!strcmp(state, "active_allocated")) {
        key_int(w, "requested_size", size);
        str(w, "frames");
        frames(w, frames_i);
    }
    tpa_pickle_close(&w->pk);
}

/* A segment with its blocks in address order and inactive blocks for the gaps. */
static void put_segment(writer_t *w, const mv_segment_t *s) {
    int64_t active = 0;
    for (size_t k = 0; k < s->n_blocks; k++) active += s->blocks[k].size;
    tpa_pickle_dict(&w->pk);
    key_int(w, "device", s->device);
    key_int(w, "address", s->addr);
    key_int(w, "total_size", s->size);
    key_int(w, "allocated_size", active);
    key_int(w, "active_size", active);
    key_int(w, "requested_size", active);
    key_int(w, "stream", s->stream);
    key_str(w, "segment_type", "large");
    str(w, "is_expandable");
    tpa_pickle_bool(&w->pk, 0);
    str(w, "frames");
    frames(w, s->frames);
    if (s->library) key_str(w, "category", s->library);
    str(w, "blocks");
    tpa_pickle_list(&w->pk);
    int64_t cursor = s->addr;
    for (size_t k = 0; k < s->n_blocks; k++) {
        const mv_block_t *b = &s->blocks[k];
        if (b->addr > cursor) put_block(w, cursor, b->addr - cursor, "inactive", -1);
        put_block(w, b->addr, b->size, "active_allocated", b->frames);
        cursor = b->addr + b->size;
    }
    if (cursor < s->addr + s->size || !s->n_blocks) put_block(w, cursor, s->addr + s->size - cursor, "inactive", -1);
    tpa_pickle_close(&w->pk);
    tpa_pickle_close(&w->pk);
}

/* One device's entries, the newest max_events; the number left out into *dropped. */
static void put_device_trace(writer_t *w, int64_t device, size_t max_events, int64_t *dropped, int add_unknown) {
    const mv_trace_t *t = w->t;
    size_t n = 0;
    for (size_t i = 0; i < t->n_entries; i++) n += t->entries[i].device == device;
    size_t skip = max_events && n > max_events ? n - max_events : 0;
    *dropped += (int64_t)skip;
    tpa_pickle_list(&w->pk);
    for (size_t i = 0; i < t->n_entries; i++) {
        if (t->entries[i].device != device) continue;
        if (skip) {
            skip--;
            continue;
        }
        put_entry(w, &t->entries[i]);
    }
    if (add_unknown) { /* the viewer needs the category "unknown" once categories are used */
        mv_entry_t last = {"snapshot", 0, 0, 0, 0, device, -1, "unknown", "tpaudit: end of the export", -1};
        for (size_t i = t->n_entries; i-- > 0;)
            if (t->entries[i].device == device) {
                last.time_us = t->entries[i].time_us;
                break;
            }
        put_entry(w, &last);
    }
    tpa_pickle_close(&w->pk);
}

int tpa_render_memviz(const tpa_report_t *r, size_t run, const tpa_memviz_options_t *o, FILE *out) {
    mv_trace_t t;
    if (mv_trace_build(r, run, o, &t)) {
        mv_trace_free(&t);
        return -1;
    }
    writer_t w = {.t = &t};
    w.frames_memo = malloc((t.n_frames ? t.n_frames : 1) * sizeof *w.frames_memo);
    if (!w.frames_memo) {
        mv_trace_free(&t);
        return -1;
    }
    for (size_t i = 0; i < t.n_frames; i++) w.frames_memo[i] = -1;
    tpa_pickle_begin(&w.pk, out);
    tpa_pickle_dict(&w.pk);
    str(&w, "segments");
    tpa_pickle_list(&w.pk);
    for (size_t i = 0; i < t.n_segments; i++) put_segment(&w, &t.segments[i]);
    tpa_pickle_close(&w.pk);
    str(&w, "device_traces");
    tpa_pickle_list(&w.pk);
    int64_t dropped = 0;
    for (int64_t d = 0; d < t.n_devices; d++) put_device_trace(&w, d, o->max_events, &dropped, !t.has_unknown && d == 0);
    tpa_pickle_close(&w.pk);
    const tpa_run_t *rn = &r->runs[run];
    str(&w, "tpaudit");
    tpa_pickle_dict(&w.pk);
    key_str(&w, "database", rn->file);
    key_int(&w, "pid", rn->pid);
    str(&w, "rank");
    if (rn->has_rank)
        tpa_pickle_int(&w.pk, rn->rank);
    else
        tpa_pickle_none(&w.pk);
    key_str(&w, "owner_device", rn->owner_device);
    key_int(&w, "unplaced_bytes", t.unplaced_bytes);
    key_int(&w, "unknown_bytes", t.unknown_bytes);
    key_int(&w, "phase_bytes", t.phase_bytes);
    key_int(&w, "entries_left_out", dropped);
    key_str(&w, "layout", "blocks are laid first-fit by tpaudit: owners' bytes are known, their addresses are not");
    tpa_pickle_close(&w.pk);
    tpa_pickle_close(&w.pk);
    int rc = tpa_pickle_end(&w.pk);
    free(w.frames_memo);
    free(w.str_keys);
    free(w.str_ids);
    mv_trace_free(&t);
    return rc || ferror(out) ? -1 : 0;
}
