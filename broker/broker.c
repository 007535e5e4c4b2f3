/*
 * The broker's tick. (State machine in progress: see docs/broker.md.)
 */
#include "broker/broker.h"

#include <stdlib.h>

struct isc_broker {
	struct isc_store *store;
	long tick_interval_ms;
};

int isc_broker_new(struct isc_store *store, struct isc_broker **out, struct isc_err *err)
{
	struct isc_broker *b = calloc(1, sizeof(*b));
	if (!b)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	b->store = store;
	b->tick_interval_ms = 2000;
	*out = b;
	return 0;
}

void isc_broker_free(struct isc_broker *b)
{
	free(b);
}

long isc_broker_tick_interval_ms(const struct isc_broker *b)
{
	return b->tick_interval_ms;
}

int isc_broker_tick(struct isc_broker *b, struct isc_err *err)
{
	(void)b;
	(void)err;
	return 0;
}
