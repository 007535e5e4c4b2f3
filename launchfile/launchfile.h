/*
 * Launch files (.isc): the TOML file a user writes to describe an experiment, and
 * its validation into a struct isc_launch.
 *
 * Validation reports every problem, not just the first, each with the line, column
 * and field it concerns, printable as
 *     FILE:LINE:COL: error: FIELD: message
 * A TOML syntax error is a single problem with field "toml". A missing required field
 * is reported at 1:1 (the file as a whole). The rules and limits are documented in
 * docs/launch-files.md; the limits are the ISC_LAUNCH_MAX_* constants below.
 */
#ifndef ISC_LAUNCHFILE_LAUNCHFILE_H
#define ISC_LAUNCHFILE_LAUNCHFILE_H

#include "common/buf.h"
#include "common/err.h"

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>

#define ISC_LAUNCH_MAX_FILE_BYTES ((size_t)1024 * 1024) /* isc_launch_read_file's default */
#define ISC_LAUNCH_MAX_NAME       128                   /* experiment_name, bytes */
#define ISC_LAUNCH_MAX_ID         128                   /* project, dataset, artifact, shape ids */
#define ISC_LAUNCH_MAX_IMAGE      512                   /* image reference, bytes */
#define ISC_LAUNCH_MAX_COMMAND    (64 * 1024)           /* command, bytes */
#define ISC_LAUNCH_MAX_LIST       64                    /* items in any list */
#define ISC_LAUNCH_MAX_ARTIFACTS  3                     /* input_artifact_id_list */
#define ISC_LAUNCH_MAX_GPUS       72
#define ISC_LAUNCH_MAX_BURST_GPUS 48
#define ISC_LAUNCH_MAX_RAPID      5

enum isc_compute_mode {
	ISC_MODE_CYCLE = 0, /* the default */
	ISC_MODE_INTERRUPTIBLE,
	ISC_MODE_BURST,
};

/* Where a list item was written: so later checks (shape ids against the catalog) can
 * point at FILE:LINE:COL and name the item by its index in the file. */
struct isc_launch_pos {
	int line, col; /* 1-based */
	size_t index;  /* the item's index in the file's array (duplicates are dropped) */
};

/* A list of owned, NUL-terminated strings, with where each was written. */
struct isc_strlist {
	char **items;
	struct isc_launch_pos *pos; /* len entries, parallel to items */
	size_t len;
};

/* A validated experiment. Every pointer is owned by the struct (isc_launch_free). */
struct isc_launch {
	char *project_id; /* isc_project_id */
	/* Where isc_project_id's value is, for iscd's "no such project" (checked after parsing). */
	struct isc_launch_pos project_pos;
	char *experiment_name; /* experiment_name */
	int gpus;              /* 1..72; at most 48 for burst */
	char *command;         /* may contain newlines and tabs */
	enum isc_compute_mode compute_mode;
	int max_rapid_cycles; /* 1..5; 0 when absent (cycle only) */
	struct isc_strlist dataset_ids;
	struct isc_strlist burst_shapes;       /* burst_shape_priority_list, in priority order */
	struct isc_strlist input_artifact_ids; /* at most 3 */
	char *image;                           /* container image; NULL when absent */
	/* burst_rank: "price" (0, also when absent), "work", "expected" (enum isc_rank_mode). */
	int burst_rank;
	int burst_rank_set; /* the file sets burst_rank */
};

struct isc_launch_problem {
	int line, col;  /* 1-based */
	int warning;    /* 1: printed as "warning:" and does not make the file invalid */
	char field[80]; /* the field ("gpus", "dataset_id_list[2]", "toml", an unknown key) */
	char msg[640];  /* room for a driver's "no credentials: looked in ..." */
};

/* Problems found in one file, in order of position (line, then column). */
struct isc_launch_problems {
	struct isc_launch_problem *items; /* owned */
	size_t len, cap;
};

void isc_launch_problems_init(struct isc_launch_problems *p);
void isc_launch_problems_cleanup(struct isc_launch_problems *p);
/* Writes one "PATH:LINE:COL: error: FIELD: message\n" per problem ("warning:" for warnings). */
int isc_launch_problems_write(const struct isc_launch_problems *p, const char *path,
                              struct isc_buf *out);
void isc_launch_problems_print(const struct isc_launch_problems *p, const char *path, FILE *f);
/* Orders the problems by position (line, then column), ties kept in the order found. */
void isc_launch_problems_sort(struct isc_launch_problems *p);
/* Appends a problem found after parsing (e.g. a shape id the catalog lacks); ISC_ENOMEM or 0. */
int isc_launch_problems_add(struct isc_launch_problems *p, int warning, int line, int col,
                            const char *field, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

/*
 * Validates len bytes of launch-file text. path is used only in err's message.
 * Returns 0 and *out (caller frees with isc_launch_free); ISC_EINVALID when the file
 * has problems (all of them appended to *problems, which the caller initialised;
 * err says how many); ISC_ENOMEM.
 */
int isc_launch_parse(const char *path, const char *text, size_t len, struct isc_launch **out,
                     struct isc_launch_problems *problems, struct isc_err *err);
void isc_launch_free(struct isc_launch *l);

/*
 * Reads a whole file of at most max_bytes (0 = ISC_LAUNCH_MAX_FILE_BYTES) into a
 * NUL-terminated *text (caller frees). ISC_EIO when it cannot be read, ISC_EINVALID
 * when it is larger than the cap or not a regular file.
 */
int isc_launch_read_file(const char *path, size_t max_bytes, char **text, size_t *len,
                         struct isc_err *err);
/*
 * `isc burst` (POST /v1/experiments?default_mode=burst): a file that does not set
 * compute_mode is a burst. When the heap text *text (*len bytes, NUL-terminated)
 * sets none, appends `compute_mode = "burst"` last, so every position the user sees
 * is still that of their file (*text may move). A text that does not parse is left
 * as it is, so its own errors show. 0 or ISC_ENOMEM.
 */
int isc_launch_default_burst(char **text, size_t *len, struct isc_err *err);
/* isc_launch_read_file + isc_launch_parse. */
int isc_launch_load(const char *path, struct isc_launch **out, struct isc_launch_problems *problems,
                    struct isc_err *err);

/* "cycle", "interruptible", "burst". */
const char *isc_compute_mode_name(enum isc_compute_mode m);
/* Parses a mode name; returns 0 or ISC_EINVALID. */
int isc_compute_mode_parse(const char *s, enum isc_compute_mode *out);

/*
 * The normalized experiment as a new JSON object (caller decrefs), every field present
 * with defaults filled in: isc_project_id, experiment_name, gpus, command, compute_mode,
 * max_rapid_cycles (null when absent), dataset_id_list, burst_shape_priority_list,
 * input_artifact_id_list (arrays, [] when absent), image (null when absent);
 * burst_rank only when the file sets it (absent means "price").
 * NULL on allocation failure.
 */
json_t *isc_launch_to_json(const struct isc_launch *l);

#endif
