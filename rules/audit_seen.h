/* audit_seen.h - what an audit must have seen before it may call a tensor
 * stale (docs/ANALYZER.md, "What an audit must have seen"), as SQL
 * conditions on the database's audit and ref tables: the floor under the
 * finding queries (findings.c), the growth rule (memory_growth.c), the
 * judge (judge.c) and the shim's in-process verdict, so that none of them
 * reaches into another's header for it. */
#ifndef TPA_AUDIT_SEEN_H
#define TPA_AUDIT_SEEN_H

/* The model, that is at least one live param: an SQL condition on the
 * audit whose id is the SQL expression `audit`. */
#define TPA_AUDIT_SAW_MODEL(audit) "EXISTS (SELECT 1 FROM ref v WHERE v.audit_id=" audit " AND v.role='param')"
/* ... and an optimizer: at least one optimizer reference. */
#define TPA_AUDIT_SAW_OPTIMIZER(audit) \
    "EXISTS (SELECT 1 FROM ref o WHERE o.audit_id=" audit " AND o.holder_kind='optimizer')"

#endif
