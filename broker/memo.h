/*
 * What the broker notes between steps and must keep across a restart of iscd
 * (issue 30): why each waiting burst waits, the shapes excluded for the rest of a
 * placement round, the periodic sync clocks. The functions are declared in
 * broker_int.h (broker_wait_*, broker_*exclu*, broker_sync_*); this is their
 * store connection's lifetime.
 */
#ifndef ISC_BROKER_MEMO_H
#define ISC_BROKER_MEMO_H

struct isc_broker;

/* Closes the notes' store connection (the notes stay in the store). */
void broker_memo_close(struct isc_broker *b);

#endif
