/*
 * The pool of slow API calls (api/slow.h), one rule a test: jobs run in the
 * order they came, off the submitter's thread; the queue holds queue_max and
 * refuses the next (ETHROTTLED) while a running job does not count; a stopping
 * pool refuses (ETRANSIENT) and hands queued jobs back unrun while the running
 * one finishes; an abandoned job is freed by the pool, never finished, whether
 * it was queued or running; one handed back is the owner's again. Jobs block
 * on a gate the test opens, so nothing depends on timing.
 */
#include "api/slow.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* What the jobs saw, under one lock; a gate the running jobs wait on. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER;
static int gate_open;
static int started, order[16], n_order;

struct test_job {
	struct isc_api_slow_job job; /* first */
	int id;
	pthread_t submitter;
	int ran_elsewhere; /* run on a thread other than the submitter's */
	int finished, ran, freed;
};

static void job_run(struct isc_api_slow_job *j)
{
	struct test_job *t = (struct test_job *)j;
	pthread_mutex_lock(&lock);
	t->ran_elsewhere = !pthread_equal(pthread_self(), t->submitter);
	order[n_order++] = t->id;
	started++;
	pthread_cond_broadcast(&changed);
	while (!gate_open)
		pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
}

static void job_finish(struct isc_api_slow_job *j, int ran)
{
	struct test_job *t = (struct test_job *)j;
	pthread_mutex_lock(&lock);
	t->finished++;
	t->ran = ran;
	pthread_cond_broadcast(&changed);
	pthread_mutex_unlock(&lock);
}

/* The jobs are the test's (on its stack): "freeing" one is recorded, not done. */
static void job_free(struct isc_api_slow_job *j)
{
	struct test_job *t = (struct test_job *)j;
	pthread_mutex_lock(&lock);
	t->freed++;
	pthread_cond_broadcast(&changed);
	pthread_mutex_unlock(&lock);
}

static void job_init(struct test_job *t, int id)
{
	memset(t, 0, sizeof(*t));
	t->id = id;
	t->submitter = pthread_self();
	t->job.run = job_run;
	t->job.finish = job_finish;
	t->job.free = job_free;
}

static int setup(void **state)
{
	(void)state;
	gate_open = 0;
	started = 0;
	n_order = 0;
	return 0;
}

static void open_gate(void)
{
	pthread_mutex_lock(&lock);
	gate_open = 1;
	pthread_cond_broadcast(&changed);
	pthread_mutex_unlock(&lock);
}

static void wait_started(int n)
{
	pthread_mutex_lock(&lock);
	while (started < n)
		pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
}

/* Until the job was handed back (finished) or freed. */
static void wait_done(struct test_job *t)
{
	pthread_mutex_lock(&lock);
	while (!t->finished && !t->freed)
		pthread_cond_wait(&changed, &lock);
	pthread_mutex_unlock(&lock);
}

static void runs_in_order_off_the_submitters_thread(void **state)
{
	struct isc_api_slow *p;
	struct test_job j[3];
	(void)state;

	assert_int_equal(isc_api_slow_new(1, 8, &p, NULL), 0);
	for (int i = 0; i < 3; i++) {
		job_init(&j[i], i + 1);
		assert_int_equal(isc_api_slow_submit(p, &j[i].job, NULL), 0);
	}
	open_gate();
	for (int i = 0; i < 3; i++) {
		wait_done(&j[i]);
		assert_int_equal(j[i].finished, 1);
		assert_int_equal(j[i].ran, 1);
		assert_int_equal(j[i].freed, 0);
		assert_true(j[i].ran_elsewhere);
	}
	assert_int_equal(n_order, 3);
	assert_int_equal(order[0], 1);
	assert_int_equal(order[1], 2);
	assert_int_equal(order[2], 3);
	isc_api_slow_free(p);
}

static void a_full_queue_refuses_and_running_jobs_do_not_count(void **state)
{
	struct isc_api_slow *p;
	struct test_job running, queued[2], refused;
	struct isc_err err;
	size_t nq, nr;
	(void)state;

	assert_int_equal(isc_api_slow_new(1, 2, &p, NULL), 0);
	job_init(&running, 1);
	assert_int_equal(isc_api_slow_submit(p, &running.job, NULL), 0);
	wait_started(1); /* on the thread, out of the queue */
	for (int i = 0; i < 2; i++) {
		job_init(&queued[i], 2 + i);
		assert_int_equal(isc_api_slow_submit(p, &queued[i].job, NULL), 0);
	}
	isc_api_slow_counts(p, &nq, &nr);
	assert_int_equal(nq, 2);
	assert_int_equal(nr, 1);
	job_init(&refused, 9);
	isc_err_clear(&err);
	assert_int_equal(isc_api_slow_submit(p, &refused.job, &err), ISC_ETHROTTLED);
	assert_non_null(strstr(err.msg, "api_slow_queue"));
	assert_int_equal(refused.finished + refused.freed, 0); /* still the caller's */
	open_gate();
	wait_done(&running);
	wait_done(&queued[0]);
	wait_done(&queued[1]);
	/* Room again once the queue drained. */
	assert_int_equal(isc_api_slow_submit(p, &refused.job, NULL), 0);
	wait_done(&refused);
	assert_int_equal(refused.ran, 1);
	isc_api_slow_free(p);
}

/* Stops the pool on a thread of its own (stop waits for the running job). */
static void *stopper(void *arg)
{
	isc_api_slow_stop(arg);
	return NULL;
}

/* A pool of one thread running `running` (held at the gate) with `queued` behind it. */
static struct isc_api_slow *pool_running_one_queued_one(struct test_job *running,
                                                        struct test_job *queued)
{
	struct isc_api_slow *p;
	assert_int_equal(isc_api_slow_new(1, 4, &p, NULL), 0);
	job_init(running, 1);
	job_init(queued, 2);
	assert_int_equal(isc_api_slow_submit(p, &running->job, NULL), 0);
	wait_started(1);
	assert_int_equal(isc_api_slow_submit(p, &queued->job, NULL), 0);
	return p;
}

static void stopping_hands_queued_back_unrun_and_refuses_new(void **state)
{
	struct isc_api_slow *p;
	struct test_job running, queued, late;
	struct isc_err err;
	pthread_t t;
	(void)state;

	p = pool_running_one_queued_one(&running, &queued);
	assert_int_equal(pthread_create(&t, NULL, stopper, p), 0);
	/* The queued job comes back unrun while the running one still waits on the gate. */
	wait_done(&queued);
	assert_int_equal(queued.finished, 1);
	assert_int_equal(queued.ran, 0);
	assert_int_equal(running.finished, 0);
	job_init(&late, 3);
	isc_err_clear(&err);
	assert_int_equal(isc_api_slow_submit(p, &late.job, &err), ISC_ETRANSIENT);
	assert_non_null(strstr(err.msg, "shutting down"));
	open_gate();
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(running.finished, 1); /* stop returned after it finished */
	assert_int_equal(running.ran, 1);
	assert_int_equal(n_order, 1); /* the queued one never ran */
	isc_api_slow_free(p);
}

static void abandoned_jobs_are_freed_by_the_pool_never_finished(void **state)
{
	struct isc_api_slow *p;
	struct test_job running, queued, handed_back;
	(void)state;

	p = pool_running_one_queued_one(&running, &queued);

	/* Queued: out of the queue and freed at once, never run. */
	assert_int_equal(isc_api_slow_abandon(p, &queued.job), 1);
	assert_int_equal(queued.freed, 1);
	/* Running: freed by its thread once run, not finished. */
	assert_int_equal(isc_api_slow_abandon(p, &running.job), 1);
	assert_int_equal(running.freed, 0);
	open_gate();
	wait_done(&running);
	assert_int_equal(running.freed, 1);
	assert_int_equal(running.finished, 0);
	assert_int_equal(queued.finished, 0);
	assert_int_equal(n_order, 1);

	/* Handed back: the owner's again, so abandoning it says 0 (the owner frees it). */
	job_init(&handed_back, 3);
	assert_int_equal(isc_api_slow_submit(p, &handed_back.job, NULL), 0);
	wait_done(&handed_back);
	assert_int_equal(isc_api_slow_abandon(p, &handed_back.job), 0);
	assert_int_equal(handed_back.freed, 0);
	isc_api_slow_free(p);
}

static void refuses_an_empty_pool(void **state)
{
	struct isc_api_slow *p = (void *)1;
	struct isc_err err;
	(void)state;
	isc_err_clear(&err);
	assert_int_equal(isc_api_slow_new(0, 4, &p, &err), ISC_EINVALID);
	assert_null(p);
	assert_int_equal(isc_api_slow_new(2, 0, &p, &err), ISC_EINVALID);
	isc_api_slow_free(NULL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(runs_in_order_off_the_submitters_thread, setup),
	    cmocka_unit_test_setup(a_full_queue_refuses_and_running_jobs_do_not_count, setup),
	    cmocka_unit_test_setup(stopping_hands_queued_back_unrun_and_refuses_new, setup),
	    cmocka_unit_test_setup(abandoned_jobs_are_freed_by_the_pool_never_finished, setup),
	    cmocka_unit_test_setup(refuses_an_empty_pool, setup),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
