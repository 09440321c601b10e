/* records.h - the one description of every table the shim writes: each
 * column's name, its SQL declaration, how a record fills it (bind kind) and
 * from what (an expression).  db.c makes the schema and the statements'
 * SQL from it, rows.c the binds; tests/shim/test_schema.py checks
 * docs/schema.md, the analyzer's seed fixture and the probe's structs
 * against the database the shim writes.
 *
 * X(column, declaration, kind, expression)
 *   kind: I64 (an integer), OPT (NULL when negative), KEY (NULL when 0),
 *         BOOL (0/1), MAYBE (struct tpa_maybe: NULL unless .has), TEXT
 *         (struct tpa_text: the record's own bytes or a static string, NULL
 *         when .p is NULL), COPY (a NUL-terminated string SQLite copies),
 *         BLOB (struct tpa_blob), NONE (not written by the insert: an
 *         autoincrement id, or a column a later UPDATE sets).  binds.h
 *         holds one helper per kind.
 *   expression: evaluated in the row function that writes the table (rows.c
 *         for records and the run row, stack.c, modules.c), where for a
 *         record f is its fixed part, v its view (strings) and stack_id its
 *         native stack.
 * Adding a column: one line here, and the field it comes from: for a
 * tensor, a field of tpaudit_tensor_t (include/tpaudit.h), which reaches
 * the row as f.t.<field> and the probe's ctypes struct (generated from the
 * header) with no other copy; docs/schema.md describes it.  A value field
 * only: the caller's pointers are cleared before the record is queued
 * (api.c), so a string field gets a slot in TPA_TENSOR_SLOTS
 * (shim_internal.h) and is read with view_text, never through f.t. */
#ifndef TPAUDIT_SHIM_RECORDS_H
#define TPAUDIT_SHIM_RECORDS_H

#define TPA_SCHEMA_VERSION 3

/* ---- run: one row, inserted at start, its state updated at every commit ---- */
#define TPA_RUN_START_COLUMNS(X)                                      \
    X(id, "INTEGER PRIMARY KEY CHECK (id = 1)", I64, 1)               \
    X(tool_version, "TEXT NOT NULL", TEXT, text_of(TPA_TOOL_VERSION)) \
    X(host, "TEXT NOT NULL", COPY, p->host)                           \
    X(pid, "INTEGER NOT NULL", I64, p->pid)                           \
    X(ppid, "INTEGER NOT NULL", I64, p->ppid)                         \
    X(argv, "TEXT NOT NULL", COPY, p->argv)                           \
    X(exe, "TEXT", COPY, p->exe[0] ? p->exe : NULL)                   \
    X(start_ns, "INTEGER NOT NULL", I64, p->start_ns)                 \
    X(start_unix_ns, "INTEGER NOT NULL", I64, p->start_unix_ns)
#define TPA_RUN_STATE_COLUMNS(X)                                                           \
    X(end_ns, "INTEGER", MAYBE, maybe(end != NULL, end ? end->ts : 0))                     \
    X(exit_status, "INTEGER", MAYBE, maybe(end && end->has_status, end ? end->status : 0)) \
    X(complete, "INTEGER NOT NULL DEFAULT 0", BOOL, end && !tpa_run_is_incomplete())       \
    X(rank, "INTEGER", OPT, s->rank)                                                       \
    X(world_size, "INTEGER", OPT, s->world_size)                                           \
    X(local_rank, "INTEGER", OPT, s->local_rank)                                           \
    X(dropped_events, "INTEGER NOT NULL DEFAULT 0", I64, (int64_t)s->dropped)              \
    X(truncated_strings, "INTEGER NOT NULL DEFAULT 0", I64, (int64_t)s->truncated)         \
    X(cupti, "TEXT NOT NULL DEFAULT 'off: not started'", COPY, s->cupti)                   \
    X(cupti_dropped, "INTEGER NOT NULL DEFAULT 0", I64, (int64_t)s->cupti_dropped)         \
    X(python, "TEXT NOT NULL DEFAULT 'n/a'", COPY, s->python)                              \
    X(note, "TEXT", COPY, s->note[0] ? s->note : NULL)                                     \
    X(ended_by, "TEXT", TEXT, text_of(end ? end->ended_by : NULL))

/* ---- audit: begin inserts, end sets end_ns ---- */
#define TPA_AUDIT_COLUMNS(X)                                \
    X(id, "INTEGER PRIMARY KEY", I64, f.id)                 \
    X(label, "TEXT NOT NULL", TEXT, view_text_or(v, 0, "")) \
    X(step, "INTEGER NOT NULL", I64, f.step)                \
    X(begin_ns, "INTEGER NOT NULL", I64, f.ts)              \
    X(end_ns, "INTEGER", NONE, 0)                           \
    X(rank, "INTEGER", OPT, f.rank)                         \
    X(world_size, "INTEGER", OPT, f.world)

/* tensor: f.t is the caller's tpaudit_tensor_t (struct tpa_fx_tensor) */
#define TPA_TENSOR_COLUMNS(X)                                             \
    X(audit_id, "INTEGER NOT NULL", I64, f.audit_id)                      \
    X(key, "INTEGER NOT NULL", I64, (int64_t)f.t.key)                     \
    X(name, "TEXT", TEXT, view_text(v, TPA_TENSOR_S_NAME))                \
    X(shape, "TEXT NOT NULL", COPY, shape)                                \
    X(local_shape, "TEXT NOT NULL", COPY, local)                          \
    X(dtype, "TEXT", TEXT, view_text(v, TPA_TENSOR_S_DTYPE))              \
    X(device, "TEXT", TEXT, view_text(v, TPA_TENSOR_S_DEVICE))            \
    X(storage_ptr, "INTEGER NOT NULL", I64, (int64_t)f.t.storage_ptr)     \
    X(storage_bytes, "INTEGER NOT NULL", I64, (int64_t)f.t.storage_bytes) \
    X(nbytes, "INTEGER NOT NULL", I64, (int64_t)f.t.nbytes)               \
    X(requires_grad, "INTEGER NOT NULL", BOOL, f.t.requires_grad)         \
    X(has_grad, "INTEGER NOT NULL", BOOL, f.t.has_grad)                   \
    X(type, "TEXT", TEXT, view_text(v, TPA_TENSOR_S_TYPE))                \
    X(storage_offset, "INTEGER NOT NULL DEFAULT 0", I64, f.t.storage_offset)

#define TPA_REF_COLUMNS(X)                                                     \
    X(audit_id, "INTEGER NOT NULL", I64, f.audit_id)                           \
    X(holder_kind, "TEXT NOT NULL", TEXT, text_of(holder_text(f.holder_kind))) \
    X(holder_class, "TEXT", TEXT, view_text(v, TPA_REF_S_HOLDER_CLASS))        \
    X(holder_id, "INTEGER NOT NULL", I64, (int64_t)f.holder_id)                \
    X(path, "TEXT", TEXT, view_text(v, TPA_REF_S_PATH))                        \
    X(role, "TEXT NOT NULL", TEXT, text_of(role_text(f.role)))                 \
    X(tensor_key, "INTEGER NOT NULL", I64, (int64_t)f.tensor_key)              \
    X(peer_key, "INTEGER NOT NULL DEFAULT 0", I64, (int64_t)f.peer_key)

#define TPA_EVENT_COLUMNS(X)                                              \
    X(id, "INTEGER PRIMARY KEY", NONE, 0)                                 \
    X(ts_ns, "INTEGER NOT NULL", I64, f.ts)                               \
    X(kind, "TEXT NOT NULL", TEXT, text_of(event_text(f.kind)))           \
    X(name, "TEXT", TEXT, view_text(v, TPA_EVENT_S_NAME))                 \
    X(holder_class, "TEXT", TEXT, view_text(v, TPA_EVENT_S_HOLDER_CLASS)) \
    X(holder_id, "INTEGER", KEY, f.holder_id)                             \
    X(old_key, "INTEGER", KEY, f.old_key)                                 \
    X(new_key, "INTEGER", KEY, f.new_key)                                 \
    X(detail, "TEXT", TEXT, view_text(v, TPA_EVENT_S_DETAIL))             \
    X(py_stack, "TEXT", TEXT, view_text(v, TPA_EVENT_S_PY_STACK))         \
    X(stack_id, "INTEGER", KEY, (uint64_t)stack_id)

#define TPA_STACK_COLUMNS(X)                     \
    X(id, "INTEGER PRIMARY KEY", I64, id)        \
    X(hash, "INTEGER NOT NULL", I64, (int64_t)h) \
    X(depth, "INTEGER NOT NULL", I64, n)         \
    X(ips, "BLOB NOT NULL", BLOB, blob_of(copy, 8 * n)) /* little-endian u64s */

#define TPA_MODULE_COLUMNS(X)                          \
    X(id, "INTEGER PRIMARY KEY", I64, m->id)           \
    X(path, "TEXT NOT NULL", TEXT, text_of(m->path))   \
    X(base, "INTEGER NOT NULL", I64, (int64_t)m->base) \
    X(low, "INTEGER NOT NULL", I64, (int64_t)m->low)   \
    X(high, "INTEGER NOT NULL", I64, (int64_t)m->high) \
    X(build_id, "TEXT", COPY, bid[0] ? bid : NULL)     \
    X(load_ns, "INTEGER NOT NULL", I64, now)           \
    X(unload_ns, "INTEGER", NONE, 0)

/* alloc rows come from CUPTI (source 'cupti') or from tpaudit_region_*
 * (source 'region', no context, stream or correlation, pool 0) */
#define TPA_ALLOC_COLUMNS(X)                                                   \
    X(id, "INTEGER PRIMARY KEY", NONE, 0)                                      \
    X(ts_ns, "INTEGER NOT NULL", I64, f.ts)                                    \
    X(op, "TEXT NOT NULL", TEXT, text_of(f.op == TPA_FREE ? "free" : "alloc")) \
    X(address, "INTEGER NOT NULL", I64, (int64_t)f.address)                    \
    X(bytes, "INTEGER NOT NULL", I64, (int64_t)f.bytes)                        \
    X(memkind, "TEXT NOT NULL", TEXT, text_of(memkind_text(f.memkind)))        \
    X(device, "INTEGER", I64, f.device)                                        \
    X(context, "INTEGER", OPT, region ? -1 : (int64_t)f.context)               \
    X(stream, "INTEGER", OPT, region ? -1 : (int64_t)f.stream)                 \
    X(pool, "INTEGER", I64, region ? 0 : (int64_t)f.pool)                      \
    X(source, "TEXT NOT NULL", TEXT, text_of(region ? "region" : "cupti"))     \
    X(correlation, "INTEGER", OPT, region ? -1 : (int64_t)f.correlation)       \
    X(label, "TEXT", TEXT, view_text(v, 0))                                    \
    X(stack_id, "INTEGER", KEY, (uint64_t)stack_id)

#define TPA_API_CALL_COLUMNS(X)                               \
    X(correlation, "INTEGER PRIMARY KEY", I64, f.correlation) \
    X(ts_ns, "INTEGER NOT NULL", I64, f.ts)                   \
    X(api, "TEXT NOT NULL", TEXT, view_text_or(v, 0, "?"))    \
    X(thread, "INTEGER", I64, f.thread)                       \
    X(stack_id, "INTEGER", KEY, (uint64_t)stack_id)

/* ledger: one owner group of a device's memory at an audit (the probe) */
#define TPA_LEDGER_COLUMNS(X)                                                   \
    X(audit_id, "INTEGER NOT NULL", I64, f.audit_id)                            \
    X(device, "TEXT NOT NULL", TEXT, view_text_or(v, TPA_LEDGER_S_DEVICE, "?")) \
    X(owner_kind, "TEXT NOT NULL", TEXT, view_text_or(v, TPA_LEDGER_S_OWNER_KIND, "?")) \
    X(owner, "TEXT", TEXT, view_text(v, TPA_LEDGER_S_OWNER))                    \
    X(holder_class, "TEXT", TEXT, view_text(v, TPA_LEDGER_S_HOLDER_CLASS))      \
    X(path, "TEXT", TEXT, view_text(v, TPA_LEDGER_S_PATH))                      \
    X(bytes, "INTEGER NOT NULL", I64, (int64_t)f.bytes)                         \
    X(tensors, "INTEGER NOT NULL", I64, f.tensors)                              \
    X(shapes, "TEXT", TEXT, view_text(v, TPA_LEDGER_S_SHAPES))                  \
    X(dtype, "TEXT", TEXT, view_text(v, TPA_LEDGER_S_DTYPE))                    \
    X(with_graph, "INTEGER NOT NULL DEFAULT 0", I64, f.with_graph)              \
    X(created_at, "TEXT", TEXT, view_text(v, TPA_LEDGER_S_CREATED_AT))

/* sample: live memory at one optimizer step (the probe) */
#define TPA_SAMPLE_COLUMNS(X)                                \
    X(step, "INTEGER NOT NULL", I64, f.step)                 \
    X(ts_ns, "INTEGER NOT NULL", I64, f.ts)                  \
    X(device, "TEXT NOT NULL", TEXT, view_text_or(v, 0, "?")) \
    X(live_bytes, "INTEGER NOT NULL", I64, (int64_t)f.live_bytes) \
    X(reserved_bytes, "INTEGER", OPT, f.reserved_bytes)      \
    X(py_blocks, "INTEGER", OPT, f.py_blocks)

/* phase_mark: live memory where a part of a step starts (the probe, under
 * TPAUDIT_PEAK); f is struct tpa_fx_sample */
#define TPA_PHASE_MARK_COLUMNS(X)                                                   \
    X(step, "INTEGER NOT NULL", I64, f.step)                                        \
    X(ts_ns, "INTEGER NOT NULL", I64, f.ts)                                         \
    X(device, "TEXT NOT NULL", TEXT, view_text_or(v, TPA_PHASE_MARK_S_DEVICE, "?")) \
    X(phase, "TEXT NOT NULL", TEXT, view_text_or(v, TPA_PHASE_MARK_S_PHASE, "?"))   \
    X(owner, "TEXT", TEXT, view_text(v, TPA_PHASE_MARK_S_OWNER))                    \
    X(live_bytes, "INTEGER NOT NULL", I64, (int64_t)f.live_bytes)                   \
    X(reserved_bytes, "INTEGER", OPT, f.reserved_bytes)                             \
    X(peak_bytes, "INTEGER", OPT, f.peak_bytes)

/* peak_part: one part of the memory at a step's peak (the probe, under
 * TPAUDIT_PEAK on a GPU); f is struct tpa_fx_peak_part */
#define TPA_PEAK_PART_COLUMNS(X)                                                          \
    X(step, "INTEGER NOT NULL", I64, f.step)                                              \
    X(ts_ns, "INTEGER NOT NULL", I64, f.ts)                                               \
    X(device, "TEXT NOT NULL", TEXT, view_text_or(v, TPA_PEAK_PART_S_DEVICE, "?"))         \
    X(owner_kind, "TEXT NOT NULL", TEXT, view_text_or(v, TPA_PEAK_PART_S_OWNER_KIND, "?")) \
    X(owner, "TEXT", TEXT, view_text(v, TPA_PEAK_PART_S_OWNER))                           \
    X(bytes, "INTEGER NOT NULL", I64, (int64_t)f.bytes)                                   \
    X(blocks, "INTEGER NOT NULL", I64, f.blocks)

/* oom: an allocation that failed for want of device memory (the probe, the
 * CUPTI callbacks, a runtime); f is struct tpa_fx_oom */
#define TPA_OOM_COLUMNS(X)                                                       \
    X(id, "INTEGER PRIMARY KEY", NONE, 0)                                        \
    X(ts_ns, "INTEGER NOT NULL", I64, f.ts)                                      \
    X(seq, "INTEGER NOT NULL", I64, f.seq)                                       \
    X(source, "TEXT NOT NULL", TEXT, view_text_or(v, TPA_OOM_S_SOURCE, "?"))     \
    X(api, "TEXT", TEXT, view_text(v, TPA_OOM_S_API))                            \
    X(device, "INTEGER", OPT, f.device)                                          \
    X(requested, "INTEGER NOT NULL", I64, (int64_t)f.requested)                  \
    X(free_bytes, "INTEGER", OPT, f.free_bytes)                                  \
    X(total_bytes, "INTEGER", OPT, f.total_bytes)                                \
    X(reserved_free, "INTEGER", OPT, f.reserved_free)                            \
    X(largest_free, "INTEGER", OPT, f.largest_free)                              \
    X(audit_id, "INTEGER", KEY, (uint64_t)f.audit_id)                            \
    X(step, "INTEGER", OPT, f.step)                                              \
    X(py_stack, "TEXT", TEXT, view_text(v, TPA_OOM_S_PY_STACK))                  \
    X(stack_id, "INTEGER", KEY, (uint64_t)stack_id)

#define TPA_NO_COLUMNS(X)

/* T(table, insert verb, inserted columns, columns only an UPDATE sets,
 *   table constraint, index) - in the schema's order. */
#define TPA_TABLES(T)                                                                                             \
    T(run, "INSERT", TPA_RUN_START_COLUMNS, TPA_RUN_STATE_COLUMNS, "", "")                                        \
    T(audit, "INSERT OR REPLACE", TPA_AUDIT_COLUMNS, TPA_NO_COLUMNS, "", "")                                      \
    T(tensor, "INSERT OR REPLACE", TPA_TENSOR_COLUMNS, TPA_NO_COLUMNS, ", PRIMARY KEY (audit_id, key)", "")       \
    T(ref, "INSERT", TPA_REF_COLUMNS, TPA_NO_COLUMNS, "",                                                         \
      "CREATE INDEX ref_by_audit ON ref(audit_id, role, tensor_key);")                                            \
    T(event, "INSERT", TPA_EVENT_COLUMNS, TPA_NO_COLUMNS, "", "")                                                 \
    T(stack, "INSERT", TPA_STACK_COLUMNS, TPA_NO_COLUMNS, "", "")                                                 \
    T(module, "INSERT", TPA_MODULE_COLUMNS, TPA_NO_COLUMNS, "", "")                                               \
    T(alloc, "INSERT", TPA_ALLOC_COLUMNS, TPA_NO_COLUMNS, "", "CREATE INDEX alloc_by_address ON alloc(address);") \
    T(api_call, "INSERT OR REPLACE", TPA_API_CALL_COLUMNS, TPA_NO_COLUMNS, "", "")                                \
    T(ledger, "INSERT", TPA_LEDGER_COLUMNS, TPA_NO_COLUMNS, "", "CREATE INDEX ledger_by_audit ON ledger(audit_id);") \
    T(sample, "INSERT", TPA_SAMPLE_COLUMNS, TPA_NO_COLUMNS, "", "")                                               \
    T(phase_mark, "INSERT", TPA_PHASE_MARK_COLUMNS, TPA_NO_COLUMNS, "", "")                                       \
    T(oom, "INSERT", TPA_OOM_COLUMNS, TPA_NO_COLUMNS, "", "")                                                     \
    T(peak_part, "INSERT", TPA_PEAK_PART_COLUMNS, TPA_NO_COLUMNS, "", "")

#endif
