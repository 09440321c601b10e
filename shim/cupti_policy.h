/*
 * cupti_policy.h - when tpaudit leaves CUPTI to another tool. Pure
 * functions over strings and states (no CUPTI calls), unit-tested on a
 * machine without a GPU. The tracer (cupti_trace.c) applies them: at load,
 * to the environment another CUDA tool sets up; later, when another
 * subscriber asks CUPTI for its callbacks or activity buffers.
 */
#ifndef TPAUDIT_CUPTI_POLICY_H
#define TPAUDIT_CUPTI_POLICY_H

#include <stddef.h>

#include "cupti_contract.h"

/* The run row's cupti field once tpaudit has handed CUPTI over. */
#define TPA_CUPTI_YIELDED "off: yielded to another CUPTI subscriber"

/* States of the tracer. */
enum tpa_cupti_state {
    TPA_CUPTI_IDLE = 0,     /* not started (CUDA not initialized yet) */
    TPA_CUPTI_STARTING = 1, /* subscribing */
    TPA_CUPTI_ON = 2,       /* subscribed, activity enabled */
    TPA_CUPTI_OFF = 3,      /* never again in this process */
    TPA_CUPTI_YIELDING = 4  /* handing over to another subscriber */
};

/* What to do in `state` when another subscriber arrives. */
enum tpa_cupti_yield {
    TPA_YIELD_WAIT = 0,      /* a transition is under way: look again */
    TPA_YIELD_FORBID = 1,    /* not started: go straight to OFF, never start */
    TPA_YIELD_HAND_OVER = 2, /* on: flush, disable, unsubscribe, then OFF */
    TPA_YIELD_NOTHING = 3    /* off already */
};
TPA_HIDDEN enum tpa_cupti_yield tpa_cupti_yield_action(int state);

/* 1 with `why` set when the environment shows another CUDA tool in the
 * process, so tpaudit stays off CUPTI from the start: CUDA_INJECTION64_PATH
 * naming a library other than `self`, an NVTX injection library
 * (NVTX_INJECTION64_PATH: Nsight Systems, Nsight Compute), or an
 * LD_PRELOAD entry of Nsight's or compute-sanitizer's launchers. Any
 * argument may be NULL. */
TPA_HIDDEN int tpa_cupti_other_tool(const char *injection, const char *self, const char *nvtx_injection,
                                    const char *ld_preload, char *why, size_t len);

#endif /* TPAUDIT_CUPTI_POLICY_H */
