/*
 * Where an installed isc finds what it ships besides its programs: the shape
 * catalog (DATADIR/shapes) and the Control Plane pages (DATADIR/web). DATADIR is
 * PREFIX/share/isc, compiled in by the Makefile (`make install PREFIX=/usr`
 * builds /usr/share/isc into the programs). Callers look beside the program
 * first (the build tree, a relocated install) and then here.
 */
#ifndef ISC_COMMON_DATADIR_H
#define ISC_COMMON_DATADIR_H

/* The compiled-in data folder, e.g. "/usr/local/share/isc". Never NULL. */
const char *isc_data_dir(void);

#endif
