/*
 * stack_view.h - how every report shows a stack: the project root that
 * paths are shown relative to, the name of a run's program, and the text
 * form of a stack (outermost first, most recent call last, library frames
 * folded, by the rule of rules/frames.h). Internal to reports/; the HTML
 * draws on the same rules.
 */
#ifndef STACK_VIEW_H
#define STACK_VIEW_H

#include "frames.h"
#include "reports.h"

/* Where the user's code lives, so that paths can be shown relative to it. */
typedef struct tpa_paths {
    char *root; /* directory with a trailing '/', NULL when none is known */
} tpa_paths_t;

/* Derives the project root from the runs' script arguments and the user
 * frames of the findings. 0, or -1 when out of memory. */
int tpa_paths_init(tpa_paths_t *p, const tpa_report_t *r);
void tpa_paths_free(tpa_paths_t *p);
/* The path to show: relative to the root, after site-packages, or from
 * pythonX.Y/ in the standard library; else as stored. */
const char *tpa_short_path(const tpa_paths_t *p, const char *path);

/* The program a run ran, stable from run to run: a Python script's base
 * name without ".py", the module of `python -m M`, else the base name of
 * argv[0]; characters other than [A-Za-z0-9_.-] become '_'. "process" when
 * argv is unknown. Writes buf. */
const char *tpa_run_program(const tpa_run_t *run, char *buf, size_t len);

/* 1 when frame i of fr (stored innermost first) is the framework frame
 * that made the call: a Python frame of an installed package other than
 * the model libraries (torch, transformers) whose next frame inwards, past
 * the standard library's, is a model library's.  In a replacement made
 * inside ColossalAI it is the policy's `preprocess` calling transformers'
 * resize_token_embeddings.  Every report shows it in full, as the user's. */
int tpa_frame_made_the_call(const tpa_frames_t *fr, size_t i);

/* The text form of a stack under `title`, as Python prints a traceback:
 * outermost frame first, the user's frames, the frames that made the call
 * (tpa_frame_made_the_call) and the innermost frame in full, each stretch
 * of two or more other library frames folded to one line, "... N frames in
 * torch" or "... N frames in _pytest, pluggy" (a stack with no user frame
 * shows its innermost three); every string through tpa_term. */
void tpa_put_text_stack(FILE *out, const tpa_paths_t *p, const char *title, const tpa_frames_t *fr);

#endif
