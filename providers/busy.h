#ifndef ISC_PROVIDERS_BUSY_H
#define ISC_PROVIDERS_BUSY_H
/*
 * Names of cloud resources (placement groups, compact policies, compute clusters) that
 * a launch of this process is filling right now. Each driver's reconcile deletes a
 * tagged resource without a live instance; one just created for a launch still under
 * way has none yet, so the reconcile skips the names held here. Counted, so two
 * launches into one resource each hold it. Thread-safe.
 */
#include <pthread.h>

#define ISC_BUSY_NAMES_MAX 256
#define ISC_BUSY_NAME_LEN  128

struct isc_busy_names {
	pthread_mutex_t lock;
	char name[ISC_BUSY_NAMES_MAX][ISC_BUSY_NAME_LEN];
	int refs[ISC_BUSY_NAMES_MAX];
};

#define ISC_BUSY_NAMES_INIT                                                                        \
	{                                                                                          \
		.lock = PTHREAD_MUTEX_INITIALIZER                                                  \
	}

/*
 * Adds delta (+1 when a launch starts using name, -1 when it ends) to name's count. A
 * full table drops the name: a reconcile may then try a delete the cloud refuses (in
 * use) or that races the launch, which the drivers already treat as retryable.
 */
void isc_busy_names_add(struct isc_busy_names *b, const char *name, int delta);

/* 1 when a launch of this process holds name. */
int isc_busy_names_has(struct isc_busy_names *b, const char *name);

#endif
