/* host_unwind_frame.c - built without unwind tables (CMakeLists.txt), so a
 * stack captured below this frame makes libunwind fall back to frame
 * pointers and check memory (through its pipe). */
#include "hostile_common.h"

void record_without_unwind_info(int n);

void record_without_unwind_info(int n) {
    for (int i = 0; i < n; i++) {
        tpaudit_event_t e = TPAUDIT_INIT_EVENT;
        e.kind = TPAUDIT_EVENT_PARAM_CREATED;
        e.name = "no unwind info";
        e.new_key = (uint64_t)i + 1;
        e.capture_native = 1;
        tpaudit_record_event(&e);
    }
}
