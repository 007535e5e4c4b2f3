#include "providers/busy.h"

#include <stdio.h>
#include <string.h>

void isc_busy_names_add(struct isc_busy_names *b, const char *name, int delta)
{
	int free_slot = -1;

	pthread_mutex_lock(&b->lock);
	for (int i = 0; i < ISC_BUSY_NAMES_MAX; i++) {
		if (b->refs[i] && strcmp(b->name[i], name) == 0) {
			b->refs[i] += delta;
			pthread_mutex_unlock(&b->lock);
			return;
		}
		if (!b->refs[i] && free_slot < 0)
			free_slot = i;
	}
	if (delta > 0 && free_slot >= 0) {
		snprintf(b->name[free_slot], sizeof(b->name[free_slot]), "%s", name);
		b->refs[free_slot] = delta;
	}
	pthread_mutex_unlock(&b->lock);
}

int isc_busy_names_has(struct isc_busy_names *b, const char *name)
{
	int busy = 0;

	pthread_mutex_lock(&b->lock);
	for (int i = 0; i < ISC_BUSY_NAMES_MAX && !busy; i++)
		busy = b->refs[i] && strcmp(b->name[i], name) == 0;
	pthread_mutex_unlock(&b->lock);
	return busy;
}
