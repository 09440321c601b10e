/*
 * tpa_model.c - the report model's own helpers: byte counts and times
 * range-checked and summed without overflow, a byte count as text, a
 * finding appended to a report, and freeing a report, a finding and a stack.
 */
#include "tpa_model.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

int64_t tpa_add_bytes(int64_t a, int64_t b) {
    if (b > 0 && a > INT64_MAX - b) return INT64_MAX;
    if (b < 0 && a < INT64_MIN - b) return INT64_MIN;
    return a + b;
}

int64_t tpa_sane_bytes(int64_t bytes) { return bytes < 0 ? 0 : bytes > TPA_MAX_BYTES ? TPA_MAX_BYTES : bytes; }

int64_t tpa_clamp_ts(int64_t ts) { return ts < 0 ? 0 : ts > TPA_MAX_TS ? TPA_MAX_TS : ts; }

int tpa_report_add_finding(tpa_report_t *r, const tpa_finding_t *f) {
    tpa_finding_t *v = realloc(r->findings, (r->n_findings + 1) * sizeof *v);
    if (!v) return -1;
    r->findings = v;
    r->findings[r->n_findings++] = *f;
    return 0;
}

void tpa_format_bytes(int64_t bytes, char *buf, size_t len) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    double v = (double)bytes;
    int u = 0;
    while ((v >= 1024.0 || v <= -1024.0) && u < 4) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, len, "%" PRId64 " B", bytes);
    else
        snprintf(buf, len, "%.1f %s", v, units[u]);
}

void tpa_frames_free(tpa_frames_t *fr) {
    for (size_t i = 0; i < fr->n; i++) {
        free(fr->v[i].file);
        free(fr->v[i].function);
        free(fr->v[i].module);
    }
    free(fr->v);
    fr->v = NULL;
    fr->n = 0;
}

void tpa_finding_free(tpa_finding_t *f) {
    char **strs[] = {&f->kind,
                     &f->holder_kind,
                     &f->holder_class,
                     &f->holder_path,
                     &f->name,
                     &f->shape,
                     &f->local_shape,
                     &f->dtype,
                     &f->device,
                     &f->type,
                     &f->succ_name,
                     &f->succ_shape,
                     &f->succ_local_shape,
                     &f->relation,
                     &f->message,
                     &f->label,
                     &f->example};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0]; i++) {
        free(*strs[i]);
        *strs[i] = NULL;
    }
    tpa_frames_free(&f->created_at);
    tpa_frames_free(&f->replaced_at);
    tpa_frames_free(&f->alloc_stack);
    for (size_t i = 0; i < f->n_aliases; i++) free(f->aliases[i]);
    free(f->aliases);
    f->aliases = NULL;
    f->n_aliases = 0;
    for (size_t i = 0; i < f->n_later_replacements; i++) {
        free(f->later_replacements[i].name);
        tpa_frames_free(&f->later_replacements[i].at);
    }
    free(f->later_replacements);
    f->later_replacements = NULL;
    f->n_later_replacements = 0;
    tpa_oom_free(f->oom);
    f->oom = NULL;
}

void tpa_oom_free(tpa_oom_t *o) {
    if (!o) return;
    free(o->source);
    free(o->api);
    free(o->cause);
    free(o->cause_text);
    free(o->held);
    tpa_frames_free(&o->py_stack);
    tpa_frames_free(&o->native_stack);
    free(o);
}

static void owner_groups_free(tpa_owner_group_t *groups, size_t n) {
    for (size_t j = 0; j < n; j++) {
        free(groups[j].owner_kind);
        free(groups[j].owner);
        free(groups[j].path);
        free(groups[j].created_at);
    }
    free(groups);
}

void tpa_owner_points_free(tpa_owner_point_t *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        owner_groups_free(v[i].groups, v[i].n_groups);
        owner_groups_free(v[i].transient, v[i].n_transient);
        free(v[i].label);
        free(v[i].phase);
        free(v[i].phase_owner);
    }
    free(v);
}

void tpa_device_memory_free(tpa_device_memory_t *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_stacks; i++) {
        tpa_frames_free(&m->stacks[i].frames);
        free(m->stacks[i].library);
    }
    free(m->stacks);
    free(m->events);
    free(m);
}

void tpa_report_free(tpa_report_t *r) {
    for (size_t i = 0; i < r->n_runs; i++) {
        tpa_run_t *run = &r->runs[i];
        void *owned[] = {
            run->file,           run->host, run->argv, run->cupti, run->python, run->points, run->why_inconclusive,
            run->headline_label, run->marks, run->growth.samples, run->growth.device, run->growth.holder,
            run->growth.held};
        for (size_t j = 0; j < sizeof owned / sizeof owned[0]; j++) free(owned[j]);
        for (size_t j = 0; j < run->n_by_library; j++) free(run->by_library[j].library);
        free(run->by_library);
        for (size_t j = 0; j < run->n_ledger; j++) {
            free(run->ledger[j].device);
            free(run->ledger[j].owner_kind);
            free(run->ledger[j].owner);
            free(run->ledger[j].example);
        }
        free(run->ledger);
        for (size_t j = 0; j < run->n_peak_modules; j++) free(run->peak_modules[j].module);
        free(run->peak_modules);
        for (size_t j = 0; j < run->n_peak_parts; j++) free(run->peak_parts[j].module);
        free(run->peak_parts);
        free(run->peak_label);
        free(run->device_peak_phase);
        free(run->device_peak_owner);
        free(run->device_peak_audit);
        for (size_t j = 0; j < run->n_moment_parts; j++) {
            free(run->moment_parts[j].kind);
            free(run->moment_parts[j].owner);
        }
        free(run->moment_parts);
        free(run->owner_device);
        tpa_owner_points_free(run->owners, run->n_owners);
        tpa_device_memory_free(run->device_memory);
    }
    free(r->runs);
    for (size_t i = 0; i < r->n_findings; i++) tpa_finding_free(&r->findings[i]);
    free(r->findings);
    for (size_t i = 0; i < r->n_rules; i++) free(r->rules[i].rule);
    free(r->rules);
    r->runs = NULL;
    r->findings = NULL;
    r->rules = NULL;
    r->n_runs = r->n_findings = r->n_rules = 0;
}
