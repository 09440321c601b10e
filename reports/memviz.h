/*
 * memviz.h - the memory viewer's snapshot of one run, between its two
 * halves: memviz_trace.c replays the run (CUPTI's segments, the owner
 * timeline's groups laid into them) into trace entries and the segments
 * live at the end; report_memviz.c writes them as PyTorch's snapshot
 * pickle.  Internal to reports/.
 */
#ifndef TPA_MEMVIZ_H
#define TPA_MEMVIZ_H

#include "reports.h"

/* One entry of a device's trace, as the viewer's TraceEntry. */
typedef struct mv_entry {
    const char *action; /* alloc, free_requested, free_completed, segment_alloc, segment_free, snapshot, oom */
    int64_t addr, size, stream, time_us, device;
    int64_t device_free; /* an oom entry's free device bytes (the viewer reads it), -1 when unknown */
    const char *category; /* NULL: none */
    char *meta;           /* user_metadata, owned; NULL: none */
    int64_t frames;       /* index into the frames table, -1: [] */
} mv_entry_t;

/* A block live at the end, inside its segment. */
typedef struct mv_block {
    int64_t addr, size;
    const char *category;
    int64_t frames;
    size_t group; /* the owner group it is part of, 0 for a library's block (groups count from 1) */
} mv_block_t;

typedef struct mv_segment {
    int64_t addr, size, device, stream;
    int64_t frames;
    const char *library; /* NULL: PyTorch's caching allocator */
    mv_block_t *blocks;  /* in address order */
    size_t n_blocks, cap_blocks;
} mv_segment_t;

typedef struct mv_trace {
    mv_entry_t *entries; /* all devices, in time order */
    size_t n_entries, cap_entries;
    mv_segment_t *segments; /* live at the end (also during the replay) */
    size_t n_segments, cap_segments;
    const tpa_frames_t **frames; /* the frames table: the run's native stacks, then parsed Python stacks */
    int *frames_owned;
    size_t n_frames, cap_frames;
    int64_t n_devices;      /* device_traces' length */
    int64_t unplaced_bytes; /* owner bytes no segment had room for, at the end */
    int has_unknown;        /* an entry has category "unknown" */
    int64_t unknown_bytes;  /* the most bytes the group "unknown" held at one sample or mark */
    int64_t phase_bytes;    /* the most bytes the parts of a step were named for at one point */
} mv_trace_t;

/* Replays run `run` of `r` (it has device_memory and owners) within the
 * options' steps.  0, or -1 out of memory. */
int mv_trace_build(const tpa_report_t *r, size_t run, const tpa_memviz_options_t *o, mv_trace_t *t);
void mv_trace_free(mv_trace_t *t);
/* The CUDA index of the device run's owners go to: its ledger's, or the one
 * device whose segments are PyTorch's (memviz_device.c); -1 when none. */
int64_t mv_owner_device(const tpa_run_t *run);

#endif
