/*
 * memviz_trace.c - replays a run for the memory viewer: CUPTI's device
 * allocations are segments (PyTorch's caching allocator's, and each other
 * library's, which is also one block of its own), and the owner timeline's
 * groups are laid into the caching allocator's segments as blocks.  At an
 * audit each group (parameters of a module, a holder's tensors, the
 * allocator's cache, ...) is set to its ledger bytes; between audits a step
 * sample or phase mark says how much is live, and what no audit named is
 * a group of the part of the step that made it ("forward" of a module,
 * ...), or "unknown".  A group that grows gets a new block for the growth
 * (so a leak is a stack of blocks, one per step); one that shrinks frees
 * its newest blocks.  tpaudit knows the bytes of an owner, not the
 * addresses of its blocks: blocks are laid first-fit into the segments
 * live then, in address order (docs/MEMVIZ.md).
 */
#include "finding_kinds.h"
#include "memviz.h"
#include "owned_text.h"
#include "tpaudit.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Changes of a group smaller than this are not replayed (allocator noise). */
#define MIN_CHANGE ((int64_t)64 << 10)

typedef struct mv_group {
    const char *kind, *owner; /* strings of the report (or static) */
    int64_t target, placed;
    int64_t *blocks; /* its blocks' addresses, oldest first */
    int64_t *block_device;
    size_t n_blocks, cap_blocks;
    char *meta; /* what its next block says */
    int64_t frames;
} mv_group_t;

typedef struct mv_ctx {
    const tpa_report_t *r;
    const tpa_run_t *run;
    mv_trace_t *t;
    mv_group_t *groups; /* groups[0] unused: block group 0 is a library's */
    size_t n_groups, cap_groups;
    int64_t device; /* the owner timeline's device */
    int emitting;   /* inside the exported steps */
    int failed;
} mv_ctx_t;

static int grow(void **v, size_t *cap, size_t need, size_t size) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need) n *= 2;
    void *p = realloc(*v, n * size);
    if (!p) return -1;
    *v = p;
    *cap = n;
    return 0;
}

static int64_t add_frames(mv_ctx_t *c, const tpa_frames_t *f, int owned) {
    mv_trace_t *t = c->t;
    if (grow((void **)&t->frames, &t->cap_frames, t->n_frames + 1, sizeof *t->frames)) goto fail;
    int *o = realloc(t->frames_owned, t->cap_frames * sizeof *o);
    if (!o) goto fail;
    t->frames_owned = o;
    t->frames[t->n_frames] = f;
    t->frames_owned[t->n_frames] = owned;
    return (int64_t)t->n_frames++;
fail:
    c->failed = 1;
    if (owned) {
        tpa_frames_free((tpa_frames_t *)f);
        free((void *)f);
    }
    return -1;
}

/* "file:line:function" lines (innermost first) as frames. */
static int64_t parse_python_stack(mv_ctx_t *c, const char *text) {
    if (!text || !*text) return -1;
    tpa_frames_t *f = calloc(1, sizeof *f);
    if (!f) {
        c->failed = 1;
        return -1;
    }
    size_t lines = 1;
    for (const char *p = text; *p; p++) lines += *p == '\n';
    f->v = calloc(lines, sizeof *f->v);
    if (!f->v) {
        free(f);
        c->failed = 1;
        return -1;
    }
    for (const char *line = text; *line && f->n < TPA_MAX_FRAMES;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        char *copy = malloc(len + 1);
        if (!copy) break;
        memcpy(copy, line, len);
        copy[len] = 0;
        char *fn = strrchr(copy, ':');
        char *ln = NULL;
        if (fn) {
            *fn++ = 0;
            ln = strrchr(copy, ':');
            if (ln) *ln++ = 0;
        }
        tpa_frame_t *fr = &f->v[f->n++];
        fr->file = tpa_strdup(copy);
        fr->line = ln ? strtol(ln, NULL, 10) : 0;
        fr->function = tpa_strdup(fn ? fn : "");
        free(copy);
        line = end ? end + 1 : line + len;
    }
    return add_frames(c, f, 1);
}

/* Appends an entry; returns it, or NULL when not emitting or out of memory. */
static mv_entry_t *entry(mv_ctx_t *c, const char *action, int64_t addr, int64_t size, int64_t stream, int64_t ts,
                         int64_t device, const char *category, const char *meta, int64_t frames) {
    if (!c->emitting) return NULL;
    mv_trace_t *t = c->t;
    if (grow((void **)&t->entries, &t->cap_entries, t->n_entries + 1, sizeof *t->entries)) {
        c->failed = 1;
        return NULL;
    }
    t->entries[t->n_entries] = (mv_entry_t){action, addr, size, stream, ts / 1000, device, -1, category,
                                            meta ? tpa_strdup(meta) : NULL, frames};
    if (category && !strcmp(category, "unknown")) t->has_unknown = 1;
    if (device + 1 > t->n_devices) t->n_devices = device + 1;
    return &t->entries[t->n_entries++];
}

/* ---- segments ---- */

static mv_segment_t *segment_at(mv_trace_t *t, int64_t addr) {
    for (size_t i = 0; i < t->n_segments; i++)
        if (addr >= t->segments[i].addr && addr < t->segments[i].addr + t->segments[i].size) return &t->segments[i];
    return NULL;
}

static int insert_block(mv_segment_t *s, size_t at, mv_block_t b) {
    if (grow((void **)&s->blocks, &s->cap_blocks, s->n_blocks + 1, sizeof *s->blocks)) return -1;
    memmove(&s->blocks[at + 1], &s->blocks[at], (s->n_blocks - at) * sizeof *s->blocks);
    s->blocks[at] = b;
    s->n_blocks++;
    return 0;
}

static void forget_group_block(mv_ctx_t *c, size_t group, int64_t addr) {
    mv_group_t *g = &c->groups[group];
    for (size_t i = 0; i < g->n_blocks; i++)
        if (g->blocks[i] == addr) {
            memmove(&g->blocks[i], &g->blocks[i + 1], (g->n_blocks - i - 1) * sizeof *g->blocks);
            memmove(&g->block_device[i], &g->block_device[i + 1], (g->n_blocks - i - 1) * sizeof *g->block_device);
            g->n_blocks--;
            return;
        }
}

/* Frees block k of segment s: the viewer's two free entries. */
static void free_block(mv_ctx_t *c, mv_segment_t *s, size_t k, int64_t ts) {
    mv_block_t b = s->blocks[k];
    entry(c, "free_requested", b.addr, b.size, s->stream, ts, s->device, b.category, NULL, b.frames);
    entry(c, "free_completed", b.addr, b.size, s->stream, ts, s->device, b.category, NULL, b.frames);
    memmove(&s->blocks[k], &s->blocks[k + 1], (s->n_blocks - k - 1) * sizeof *s->blocks);
    s->n_blocks--;
    if (b.group) {
        c->groups[b.group].placed -= b.size;
        forget_group_block(c, b.group, b.addr);
    }
}

static void segment_event(mv_ctx_t *c, const tpa_device_memory_t *dm, const tpa_segment_event_t *e) {
    mv_trace_t *t = c->t;
    if (!e->is_free) {
        if (segment_at(t, e->address) || e->bytes <= 0) return; /* overlapping or empty: not a segment */
        const tpa_alloc_stack_t *st = e->stack >= 0 ? &dm->stacks[e->stack] : NULL;
        const char *library = st ? st->library : NULL;
        size_t at = 0;
        while (at < t->n_segments && t->segments[at].addr < e->address) at++;
        if (grow((void **)&t->segments, &t->cap_segments, t->n_segments + 1, sizeof *t->segments)) {
            c->failed = 1;
            return;
        }
        memmove(&t->segments[at + 1], &t->segments[at], (t->n_segments - at) * sizeof *t->segments);
        t->n_segments++;
        mv_segment_t *s = &t->segments[at];
        *s = (mv_segment_t){e->address, e->bytes, e->device, e->stream, e->stack, library, NULL, 0, 0};
        const char *category = library ? library : "unknown";
        char meta[320];
        snprintf(meta, sizeof meta, "%s", library ? library : "PyTorch's caching allocator (owners: its blocks)");
        entry(c, "segment_alloc", s->addr, s->size, s->stream, e->ts_ns, s->device, category, meta, s->frames);
        if (library) {
            snprintf(meta, sizeof meta, "library %s", library);
            if (insert_block(s, 0, (mv_block_t){s->addr, s->size, library, s->frames, 0})) c->failed = 1;
            entry(c, "alloc", s->addr, s->size, s->stream, e->ts_ns, s->device, library, meta, s->frames);
        }
        return;
    }
    mv_segment_t *s = NULL;
    for (size_t i = 0; i < t->n_segments; i++)
        if (t->segments[i].addr == e->address) s = &t->segments[i];
    if (!s) return; /* its allocation was not recorded */
    while (s->n_blocks) free_block(c, s, s->n_blocks - 1, e->ts_ns);
    entry(c, "segment_free", s->addr, s->size, s->stream, e->ts_ns, s->device, s->library ? s->library : "unknown",
          NULL, s->frames);
    free(s->blocks);
    size_t at = (size_t)(s - t->segments);
    memmove(&t->segments[at], &t->segments[at + 1], (t->n_segments - at - 1) * sizeof *t->segments);
    t->n_segments--;
}

/* ---- owner groups ---- */

static size_t group_of(mv_ctx_t *c, const char *kind, const char *owner) {
    for (size_t i = 1; i < c->n_groups; i++)
        if (!strcmp(c->groups[i].kind, kind) && (c->groups[i].owner == owner ||
                                                 (owner && c->groups[i].owner && !strcmp(c->groups[i].owner, owner))))
            return i;
    if (grow((void **)&c->groups, &c->cap_groups, (c->n_groups ? c->n_groups : 1) + 1, sizeof *c->groups)) {
        c->failed = 1;
        return 0;
    }
    if (!c->n_groups) c->n_groups = 1, memset(&c->groups[0], 0, sizeof *c->groups);
    mv_group_t *g = &c->groups[c->n_groups];
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->owner = owner;
    g->frames = -1;
    return c->n_groups++;
}

/* Lays `bytes` of group gi first-fit into the caching allocator's segments. */
static void place(mv_ctx_t *c, size_t gi, int64_t bytes, int64_t ts) {
    mv_trace_t *t = c->t;
    for (size_t i = 0; i < t->n_segments && bytes > 0; i++) {
        mv_segment_t *s = &t->segments[i];
        if (s->library || s->device != c->device) continue;
        int64_t cursor = s->addr;
        for (size_t k = 0; k <= s->n_blocks && bytes > 0; k++) {
            int64_t next = k < s->n_blocks ? s->blocks[k].addr : s->addr + s->size;
            int64_t gap = next - cursor;
            if (gap > 0) {
                int64_t take = gap < bytes ? gap : bytes;
                mv_group_t *g = &c->groups[gi];
                if (insert_block(s, k, (mv_block_t){cursor, take, g->kind, g->frames, gi}) ||
                    grow((void **)&g->blocks, &g->cap_blocks, g->n_blocks + 1, sizeof *g->blocks)) {
                    c->failed = 1;
                    return;
                }
                int64_t *d = realloc(g->block_device, g->cap_blocks * sizeof *d);
                if (!d) {
                    c->failed = 1;
                    return;
                }
                g->block_device = d;
                g->blocks[g->n_blocks] = cursor;
                g->block_device[g->n_blocks++] = s->device;
                g->placed += take;
                bytes -= take;
                entry(c, "alloc", cursor, take, s->stream, ts, s->device, g->kind, g->meta, g->frames);
                k++; /* past the block just inserted */
            }
            if (k < s->n_blocks) cursor = s->blocks[k].addr + s->blocks[k].size;
        }
    }
}

/* Frees group gi's newest blocks until it holds at most its target. */
static void shrink(mv_ctx_t *c, size_t gi, int64_t ts) {
    mv_group_t *g = &c->groups[gi];
    while (g->n_blocks && g->placed > g->target) {
        int64_t addr = g->blocks[g->n_blocks - 1];
        mv_segment_t *s = segment_at(c->t, addr);
        size_t k = 0;
        while (s && k < s->n_blocks && s->blocks[k].addr != addr) k++;
        if (!s || k == s->n_blocks) { /* not found: forget it */
            g->n_blocks--;
            continue;
        }
        free_block(c, s, k, ts);
    }
}

static int small_change(const mv_group_t *g) {
    int64_t d = g->target - g->placed;
    return g->target && d < MIN_CHANGE && d > -MIN_CHANGE;
}

/* Every group towards its target: frees first, then the owners, the allocator's cache last. */
static void settle(mv_ctx_t *c, int64_t ts) {
    for (size_t i = 1; i < c->n_groups; i++)
        if (c->groups[i].placed > c->groups[i].target && !small_change(&c->groups[i])) shrink(c, i, ts);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 1; i < c->n_groups; i++) {
            mv_group_t *g = &c->groups[i];
            if ((pass == 0) == !strcmp(g->kind, "allocator_cache")) continue;
            if (g->target > g->placed && !small_change(g)) place(c, i, g->target - g->placed, ts);
        }
}

static void set_meta(mv_ctx_t *c, size_t gi, const char *text) {
    free(c->groups[gi].meta);
    c->groups[gi].meta = tpa_strdup(text);
}

/* The finding a group is part of: a stale tensor's, or the growth of its holder. */
static const tpa_finding_t *finding_of(mv_ctx_t *c, const tpa_owner_group_t *g) {
    size_t run = (size_t)(c->run - c->r->runs);
    for (size_t i = 0; i < c->r->n_findings; i++) {
        const tpa_finding_t *f = &c->r->findings[i];
        if (f->run_index != run || f->oom) continue;
        if (!strcmp(g->owner_kind, "stale") && !tpa_finding_grows(f)) return f;
        if (tpa_finding_grows(f) && g->owner && f->holder_path && !strcmp(f->holder_path, g->owner)) return f;
    }
    return NULL;
}

/* The run's OOM finding (out_of_memory, caught_out_of_memory) of p's step, else its first, or NULL. */
static const tpa_finding_t *oom_finding_at(mv_ctx_t *c, const tpa_owner_point_t *p) {
    size_t run = (size_t)(c->run - c->r->runs);
    const tpa_finding_t *first = NULL;
    for (size_t i = 0; i < c->r->n_findings; i++) {
        const tpa_finding_t *f = &c->r->findings[i];
        if (f->run_index != run || !f->oom) continue;
        if (f->step == p->step) return f;
        if (!first) first = f;
    }
    return first;
}

static void step_text(const tpa_owner_point_t *p, char *buf, size_t len) {
    if (p->step >= 0) snprintf(buf, len, "step %" PRId64, p->step);
    else snprintf(buf, len, "exit");
}

static void audit_point(mv_ctx_t *c, const tpa_owner_point_t *p) {
    char step[48], meta[1024], bytes[32];
    step_text(p, step, sizeof step);
    /* an audit without a ledger (an OOM's, a version-1 file's) is a mark: the owners stay */
    for (size_t i = 1; p->n_groups && i < c->n_groups; i++) c->groups[i].target = 0;
    for (size_t j = 0; j < p->n_groups; j++) {
        const tpa_owner_group_t *og = &p->groups[j];
        size_t gi = group_of(c, og->owner_kind, og->owner);
        if (!gi) return;
        mv_group_t *g = &c->groups[gi];
        g->target = og->bytes;
        if (!c->emitting || g->target <= g->placed) continue;
        const tpa_finding_t *f = finding_of(c, og);
        size_t n = (size_t)snprintf(meta, sizeof meta, "%s%s%s; %" PRId64 " tensor%s; %s (audit %s)", og->owner_kind,
                                    og->owner ? " " : "", og->owner ? og->owner : "", og->tensors,
                                    og->tensors == 1 ? "" : "s", step, p->label);
        if (og->path && n < sizeof meta) n += (size_t)snprintf(meta + n, sizeof meta - n, "; path %s", og->path);
        if (f && n < sizeof meta) {
            if (tpa_finding_grows(f)) {
                tpa_format_growth_bytes(f, bytes, sizeof bytes);
                snprintf(meta + n, sizeof meta - n, "; finding %s %s", f->kind, bytes);
            } else {
                snprintf(meta + n, sizeof meta - n, "; finding %s tensor %s", f->kind, f->name ? f->name : "?");
            }
        }
        set_meta(c, gi, meta);
        if (f && !tpa_finding_grows(f) && (f->replaced_at.n || f->created_at.n))
            g->frames = add_frames(c, f->replaced_at.n ? &f->replaced_at : &f->created_at, 0);
        else if (og->created_at)
            g->frames = parse_python_stack(c, og->created_at);
    }
    settle(c, p->ts_ns);
    int64_t measured = p->measured > 0 ? p->measured : 0;
    tpa_format_bytes(measured, bytes, sizeof bytes);
    if (p->measured < 0)
        snprintf(meta, sizeof meta, "tpaudit audit \"%s\" at %s (no ledger)", p->label, step);
    else
        snprintf(meta, sizeof meta, "tpaudit audit \"%s\" at %s: %s measured on %s", p->label, step, bytes,
                 c->run->owner_device ? c->run->owner_device : "?");
    if (strcmp(p->label, "oom")) {
        entry(c, "snapshot", 0, measured, 0, p->ts_ns, c->device, NULL, meta, -1);
        return;
    }
    /* the viewer prints an oom entry as "OOM (requested <size>, CUDA has <device_free> memory free)";
     * its metadata is the finding's own one-screen answer */
    const tpa_finding_t *f = oom_finding_at(c, p);
    const tpa_oom_t *o = f ? f->oom : NULL;
    mv_entry_t *e = entry(c, "oom", 0, o && o->requested > 0 ? o->requested : 0, 0, p->ts_ns, c->device, NULL,
                          f && f->message ? f->message : meta, -1);
    if (e && o) e->device_free = o->free_bytes;
}

/* The groups of what was made between audits: a part of a step's, or "unknown". */
static int transient_kind(const char *k) {
    return !strcmp(k, TPAUDIT_MADE_UNKNOWN) || !strcmp(k, TPAUDIT_PHASE_FORWARD) || !strcmp(k, TPAUDIT_PHASE_BACKWARD) ||
           !strcmp(k, TPAUDIT_PHASE_OPTIMIZER_STEP) || !strcmp(k, TPAUDIT_PHASE_OUTSIDE);
}

/* A step sample or phase mark: what the last audit did not attribute, by
 * the part of the step that made it (tpa_split_transient), and the cache. */
static void sample_point(mv_ctx_t *c, const tpa_owner_point_t *p) {
    char step[48], meta[256];
    step_text(p, step, sizeof step);
    const char *at = p->phase ? "phase mark" : "step sample";
    for (size_t i = 1; i < c->n_groups; i++)
        if (transient_kind(c->groups[i].kind)) c->groups[i].target = 0;
    int64_t named = 0;
    for (size_t j = 0; j < p->n_transient; j++) {
        const tpa_owner_group_t *tg = &p->transient[j];
        size_t gi = group_of(c, tg->owner_kind, tg->owner);
        if (!gi) return;
        c->groups[gi].target = tg->bytes;
        if (!strcmp(tg->owner_kind, TPAUDIT_MADE_UNKNOWN)) {
            snprintf(meta, sizeof meta, "unknown: live at %s (%s), made where no phase mark says which part of a step "
                     "ran, not yet attributed by an audit", step, at);
            if (c->emitting && tg->bytes > c->t->unknown_bytes) c->t->unknown_bytes = tg->bytes;
        } else {
            snprintf(meta, sizeof meta, "%s%s%s: made in the %s part of %s (%s), not yet attributed by an audit",
                     tg->owner_kind, tg->owner ? " of " : "", tg->owner ? tg->owner : "", tg->owner_kind, step, at);
            named = tpa_add_bytes(named, tg->bytes);
        }
        set_meta(c, gi, meta);
    }
    if (c->emitting && named > c->t->phase_bytes) c->t->phase_bytes = named;
    if (p->reserved_bytes >= 0) {
        size_t cache = group_of(c, "allocator_cache", NULL);
        if (!cache) return;
        c->groups[cache].target = p->reserved_bytes > p->live_bytes ? p->reserved_bytes - p->live_bytes : 0;
        snprintf(meta, sizeof meta, "allocator_cache: reserved but free at %s (%s)", step, at);
        set_meta(c, cache, meta);
    }
    settle(c, p->ts_ns);
}

/* An exit audit counts after every step. */
static int64_t point_step(const tpa_owner_point_t *p) { return p->step < 0 && p->label ? INT64_MAX : p->step; }

int mv_trace_build(const tpa_report_t *r, size_t run, const tpa_memviz_options_t *o, mv_trace_t *t) {
    memset(t, 0, sizeof *t);
    t->n_devices = 1;
    mv_ctx_t c = {r, &r->runs[run], t, NULL, 0, 0, 0, 0, 0};
    const tpa_run_t *rn = c.run;
    const tpa_device_memory_t *dm = rn->device_memory;
    static const tpa_device_memory_t none;
    if (!dm) dm = &none;
    for (size_t i = 0; i < dm->n_stacks; i++) add_frames(&c, &dm->stacks[i].frames, 0);
    c.device = mv_owner_device(rn);
    /* the window: from the first point of a step >= first_step to the first point after last_step */
    int64_t from = INT64_MIN, to = INT64_MAX;
    if (o->first_step != INT64_MIN || o->last_step != INT64_MAX) {
        from = INT64_MAX;
        for (size_t i = 0; i < rn->n_owners; i++) {
            int64_t s = point_step(&rn->owners[i]);
            if (s >= o->first_step && from == INT64_MAX) from = rn->owners[i].ts_ns;
            if (s > o->last_step && to == INT64_MAX && rn->owners[i].ts_ns > from) to = rn->owners[i].ts_ns;
        }
    }
    size_t e = 0, p = 0;
    while (!c.failed && (e < dm->n_events || p < rn->n_owners)) {
        int take_segment = e < dm->n_events && (p == rn->n_owners || dm->events[e].ts_ns <= rn->owners[p].ts_ns);
        int64_t ts = take_segment ? dm->events[e].ts_ns : rn->owners[p].ts_ns;
        if (ts >= to) break;
        c.emitting = ts >= from;
        if (take_segment) {
            segment_event(&c, dm, &dm->events[e++]);
        } else {
            const tpa_owner_point_t *pt = &rn->owners[p++];
            if (c.device < 0) continue; /* owners on the CPU: no device blocks */
            if (pt->label)
                audit_point(&c, pt);
            else if (pt->live_bytes >= 0)
                sample_point(&c, pt);
        }
    }
    if (c.device + 1 > t->n_devices) t->n_devices = c.device + 1;
    for (size_t i = 0; i < t->n_segments; i++)
        if (t->segments[i].device + 1 > t->n_devices) t->n_devices = t->segments[i].device + 1;
    for (size_t i = 1; i < c.n_groups; i++) {
        if (c.groups[i].target > c.groups[i].placed)
            t->unplaced_bytes = tpa_add_bytes(t->unplaced_bytes, c.groups[i].target - c.groups[i].placed);
        free(c.groups[i].blocks);
        free(c.groups[i].block_device);
        free(c.groups[i].meta);
    }
    free(c.groups);
    return c.failed ? -1 : 0;
}

void mv_trace_free(mv_trace_t *t) {
    for (size_t i = 0; i < t->n_entries; i++) free(t->entries[i].meta);
    free(t->entries);
    for (size_t i = 0; i < t->n_segments; i++) free(t->segments[i].blocks);
    free(t->segments);
    for (size_t i = 0; i < t->n_frames; i++)
        if (t->frames_owned[i]) {
            tpa_frames_free((tpa_frames_t *)t->frames[i]);
            free((void *)t->frames[i]);
        }
    free(t->frames);
    free(t->frames_owned);
    memset(t, 0, sizeof *t);
}
