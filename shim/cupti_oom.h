/* cupti_oom.h - the out-of-memory check at the exit of an allocation
 * callback (cupti_oom.c), called by cupti_trace.c's callback. */
#ifndef TPAUDIT_CUPTI_OOM_H
#define TPAUDIT_CUPTI_OOM_H

#include <cupti.h>

#include "cupti_contract.h"

/* 1 when the call of `info` was an allocation that returned out-of-memory
 * (its oom row queued), else 0. */
TPA_HIDDEN int tpa_cupti_oom_check(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const CUpti_CallbackData *info);

#endif
