/*
 * frames.h - which frames of a stack are the user's own code and which
 * library a frame belongs to (frames.c): the reports fold library frames
 * by it, the shim's verdict line shows the first user frame.
 */
#ifndef TPA_FRAMES_H
#define TPA_FRAMES_H

#include "tpa_model.h"

/* 1 when the frame is the user's code, 0 for site-packages, the standard
 * library, the probe, the interpreter and system libraries. */
int tpa_frame_is_user(const tpa_frame_t *f);
/* The library a frame belongs to, for "... 3 frames in torch": the package
 * under site-packages, "pythonX.Y" for the standard library, "tpaudit" for
 * the probe, a native module's base name; "python" otherwise. Writes buf. */
const char *tpa_frame_library(const tpa_frame_t *f, char *buf, size_t len);
/* The first user frame of a stack, else the first frame, NULL when empty. */
const tpa_frame_t *tpa_first_user_frame(const tpa_frames_t *fr);
/* A native frame's module shown by its base name. */
const char *tpa_base_name(const char *path);
/* The part of `path` after "/site-packages/" or "/dist-packages/", or
 * NULL; the part from "pythonX.Y/" of a standard-library file, or NULL. */
const char *tpa_packages_part(const char *path);
const char *tpa_stdlib_part(const char *path);

#endif
