/*
 * The dataset download (download.h).
 *
 * Blocks and runs: the object is a grid of 8 MiB blocks
 * (isc_dataset_range_bytes), fetched by `parallelism` connections at once,
 * each a thread with its own S3 client (one kept-alive connection) claiming a
 * run of the lowest blocks nobody has taken, todo / (2 x connections) of them,
 * 1..64 MiB, as one GET (claim_locked): few requests while much is left, and
 * single blocks at the end so the connections finish together. A body goes
 * from libcurl's buffer straight to pwrite(2) at its offset, so nothing is
 * held in memory: blocks that finish out of order simply wait in the file.
 * Each GET is retried on its own (the S3 client's policy: attempts with
 * jittered exponential backoff), If-Match the ETag.
 *
 * Hashing: two hashing lanes (threads) read the file back from the page cache
 * behind the "watermark", the end of the blocks written in order plus what the
 * first unfinished one holds so far: one lane feeds the SHA-256, the other the
 * MD5 of a single-part ETag and a CRC checksum, in order, as MD5 and CRC must
 * be. They are woken when the watermark has moved a lane's read (1 MiB) or a
 * block ended, not for every piece libcurl hands over. A multipart ETag's part
 * MD5s need no order: when the block size is a whole number of parts, each
 * connection hashes its own run's parts as their bytes arrive (in parallel),
 * and the ETag's MD5 of the part MD5s is taken at the end. No connection
 * claims a block more than 2 x connections x 64 MiB past what the lanes have
 * hashed, so the bytes the lanes read back are still in the page cache. A run
 * that fails mid-body is asked again from its start; if the lanes had read
 * part of the block it was in, they start over from byte 0 (rare; simpler
 * than saving every digest at every block start).
 *
 * Memory: the lanes' two 1 MiB read buffers, per connection its libcurl
 * handle and an MD5 context, the block states and the part MD5s (16 bytes a
 * part, at most 10,000 parts): flat in the object's size, and about 0.1-0.2
 * MiB more per connection (docs/datasets.md has the figures).
 *
 * Durability and resume: writeback of every 8 MiB a connection writes is
 * started at once (sync_file_range, which does not wait); each finished run is
 * made durable (fdatasync) by its connection and only then its blocks marked
 * done in PATH.sync, "ranges BLOCK_BYTES SIZE BITS" (one '0'/'1' per block),
 * written to a temporary file, fdatasync'd and renamed. A resume keeps exactly
 * the blocks marked done, whatever happened to the machine: a crash or power
 * cut loses only the runs that were in flight. The kept bytes are hashed again
 * from the file. A marker of the older single-connection format ("BOOT
 * OFFSET") keeps its durable OFFSET as whole 64 MiB blocks; one of the 8-64
 * MiB ranges written before the blocks keeps its range size as the block size.
 */
#include "datasets/download.h"

#include "datasets/checksum.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define RANGE_MIN       (8ull << 20)
#define RANGE_MAX       (64ull << 20) /* also the S3 client's largest GET */
#define OLD_RANGE_BYTES (64ull << 20) /* the single-connection marker's ranges */
#define WRITEBACK_BYTES (8ull << 20)  /* start writeback this often */
#define LANE_READ       (1u << 20)    /* what a hashing lane reads back at a time */
#define REHASH_READ     (256u << 10)  /* what a connection reads back of a resumed range */
#define WINDOW_PER_CONN 2             /* ranges ahead of the lanes, per connection */
#define NO_RANGE        ((size_t)-1)

enum ck_kind { CK_NONE, CK_SHA256, CK_CRC32C, CK_CRC32 };

/*
 * A block's state: claimed by a connection (FLIGHT), all its bytes in the file
 * (WRITTEN: the lanes may hash it), durable and in the marker (DONE).
 */
enum range_state { R_TODO = 0, R_FLIGHT, R_WRITTEN, R_DONE };

/*
 * Every in-order digest of one object. Two lanes update them, each its own
 * fields: lane 0 the SHA-256 (and a composite ChecksumSHA256), lane 1 the MD5
 * of the ETag (when the connections do not hash the parts) and a CRC checksum.
 * in_part/parts count each lane's own parts.
 */
struct hashes {
	EVP_MD_CTX *sha;                        /* all bytes; also a full-object ChecksumSHA256 */
	EVP_MD_CTX *ck_part, *ck_outer;         /* composite ChecksumSHA256 */
	EVP_MD_CTX *md5, *md5_part, *md5_outer; /* MD5 ETag: whole, or part MD5s and their MD5 */
	uint32_t crc, crc_outer;                /* CRC: all bytes or the part's; composite */
	uint64_t in_part[2], parts[2];
};

struct dl;

/*
 * ISC_DATASET_TRACE=FILE: per range, when it was claimed, asked for, its first
 * and last bytes arrived, it was durable and marked; per lane and connection
 * the time spent waiting; appended to FILE when the download ends. For
 * measuring only (docs/benchmarks.md, "Dataset transfer: where the time goes").
 */
enum { T_CLAIM, T_ASK, T_FIRST, T_LAST, T_SYNC, T_MARK, T_N };
struct trace {
	double t0;
	double (*at)[T_N]; /* per range, ms since t0 */
	double lane_wait[2], lane_busy[2], conn_window_wait[ISC_DATASET_PARALLELISM_MAX];
	unsigned long main_wakes, lane_reads[2];
};

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/*
 * A hashing lane: a thread that reads the file back behind the watermark (from
 * the page cache) and feeds its digests, so hashing overlaps the download
 * instead of following it, and MD5 and SHA-256 run side by side.
 */
struct lane {
	struct dl *x;
	int id;
	int on; /* has digests to feed */
	pthread_t thread;
	int started, busy;
	uint64_t hashed; /* bytes of the file through this lane */
	int fd;
	int failed;
	struct isc_err err;
};

/* A connection: a thread with its own S3 client, fetching one range at a time. */
struct conn {
	struct dl *x;
	struct isc_s3_client *client;
	int own_client; /* a copy, freed with the connection */
	pthread_t thread;
	int started;
	size_t range;             /* the first block of the run being fetched */
	size_t blk, blk_end;      /* the block receiving bytes; the run's end */
	uint64_t first, len, pos; /* the run's bytes, and how many are in the file */
	uint64_t writeback_from;  /* of the range, where writeback was last started */
	EVP_MD_CTX *pmd5;         /* the current part's MD5 (parts hashed here) */
};

struct dl {
	const struct isc_dataset_download *d;
	int md5_on, md5_multi; /* the ETag is an MD5 (of parts) */
	int parts_by_conn;     /* the connections hash a multipart ETag's parts */
	enum ck_kind ck;
	int ck_comp;
	struct hashes h;
	int fd;
	uint64_t range_bytes;
	size_t nranges, nparts;
	int nconns;
	struct conn *conns;
	unsigned char *part_md5; /* 16 bytes per part, when parts_by_conn */
	/* Under mu: the ranges, the watermark, the lanes' state, the first failure. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	unsigned char *state;   /* enum range_state per range */
	unsigned char *rehash;  /* resumed ranges whose part MD5s are still to be taken */
	uint64_t *got;          /* bytes in the file of each range in flight */
	size_t prefix;          /* the first block not written */
	size_t left;            /* blocks not done plus resumed blocks not rehashed */
	size_t todo;            /* blocks nobody has claimed */
	uint64_t written;       /* the watermark: bytes in order the lanes may read */
	uint64_t told;          /* the watermark the lanes were last woken for */
	pthread_cond_t main_cv; /* the calling thread: left or abort changed */
	int paused, quit;
	int abort; /* a failure or a stop: connections end */
	int fail_rc;
	struct isc_err fail_err;
	struct lane lanes[2];
	/* The marker: one writer at a time, so a later state is never overwritten. */
	pthread_mutex_t marker_mu;
	char *marker_bits;
	struct trace *tr; /* NULL unless ISC_DATASET_TRACE is set */
};

/* Notes event `what` of range i, the first time only (a retry keeps the first ask). */
static void trace_at(struct dl *x, size_t i, int what)
{
	if (x->tr && i < x->nranges && x->tr->at[i][what] == 0)
		x->tr->at[i][what] = now_ms() - x->tr->t0;
}

static void hashes_free(struct hashes *h)
{
	EVP_MD_CTX_free(h->sha);
	EVP_MD_CTX_free(h->md5);
	EVP_MD_CTX_free(h->md5_part);
	EVP_MD_CTX_free(h->md5_outer);
	EVP_MD_CTX_free(h->ck_part);
	EVP_MD_CTX_free(h->ck_outer);
	memset(h, 0, sizeof(*h));
}

static int md_new(EVP_MD_CTX **c, const EVP_MD *md)
{
	*c = EVP_MD_CTX_new();
	return *c && EVP_DigestInit_ex(*c, md, NULL) == 1 ? 0 : -1;
}

static int hashes_init(struct dl *x, struct hashes *h)
{
	int rc = 0;
	memset(h, 0, sizeof(*h));
	rc |= md_new(&h->sha, EVP_sha256());
	if (x->md5_on && !x->md5_multi)
		rc |= md_new(&h->md5, EVP_md5());
	if (x->md5_multi && !x->parts_by_conn) {
		rc |= md_new(&h->md5_part, EVP_md5());
		rc |= md_new(&h->md5_outer, EVP_md5());
	}
	if (x->ck == CK_SHA256 && x->ck_comp) {
		rc |= md_new(&h->ck_part, EVP_sha256());
		rc |= md_new(&h->ck_outer, EVP_sha256());
	}
	return rc;
}

static enum isc_crc_kind crc_kind(enum ck_kind k)
{
	return k == CK_CRC32C ? ISC_CRC32C : ISC_CRC32;
}

static int crc_on(const struct dl *x)
{
	return x->ck == CK_CRC32C || x->ck == CK_CRC32;
}

/* Whether the lanes compute the part MD5s of a multipart ETag (in order). */
static int lane_md5_parts(const struct dl *x)
{
	return x->md5_multi && !x->parts_by_conn;
}

/* Whether lane `lane` splits the bytes into parts. */
static int lane_parted(const struct dl *x, int lane)
{
	return lane == 0 ? x->ck_comp && x->ck == CK_SHA256
	                 : lane_md5_parts(x) || (x->ck_comp && crc_on(x));
}

/* Closes lane's current part: its digests into their outer digest. */
static void part_close(struct dl *x, struct hashes *h, int lane)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned n;
	if (lane == 0) {
		EVP_DigestFinal_ex(h->ck_part, md, &n);
		EVP_DigestUpdate(h->ck_outer, md, n);
		EVP_DigestInit_ex(h->ck_part, EVP_sha256(), NULL);
	} else {
		if (lane_md5_parts(x)) {
			EVP_DigestFinal_ex(h->md5_part, md, &n);
			EVP_DigestUpdate(h->md5_outer, md, n);
			EVP_DigestInit_ex(h->md5_part, EVP_md5(), NULL);
		}
		if (x->ck_comp && crc_on(x)) {
			/* A composite CRC is the CRC of the parts' CRCs, each 4 bytes big-endian.
			 */
			unsigned char be[4] = {(unsigned char)(h->crc >> 24),
			                       (unsigned char)(h->crc >> 16),
			                       (unsigned char)(h->crc >> 8), (unsigned char)h->crc};
			h->crc_outer = isc_crc_update(crc_kind(x->ck), h->crc_outer, be, 4);
			h->crc = 0;
		}
	}
	h->in_part[lane] = 0;
	h->parts[lane]++;
}

static void lane_update(struct dl *x, struct hashes *h, int lane, const unsigned char *p, size_t n)
{
	if (lane == 0)
		EVP_DigestUpdate(h->sha, p, n);
	else if (h->md5)
		EVP_DigestUpdate(h->md5, p, n);
	if (lane == 1 && crc_on(x) && !x->ck_comp)
		h->crc = isc_crc_update(crc_kind(x->ck), h->crc, p, n);
	while (lane_parted(x, lane) && n) {
		size_t take = n;
		if (take > x->d->part_size - h->in_part[lane])
			take = (size_t)(x->d->part_size - h->in_part[lane]);
		if (lane == 0) {
			EVP_DigestUpdate(h->ck_part, p, take);
		} else {
			if (lane_md5_parts(x))
				EVP_DigestUpdate(h->md5_part, p, take);
			if (x->ck_comp && crc_on(x))
				h->crc = isc_crc_update(crc_kind(x->ck), h->crc, p, take);
		}
		h->in_part[lane] += take;
		p += take;
		n -= take;
		if (h->in_part[lane] == x->d->part_size)
			part_close(x, h, lane);
	}
}

static void hex(const unsigned char *md, unsigned n, char *out)
{
	static const char digits[] = "0123456789abcdef";
	for (unsigned i = 0; i < n; i++) {
		out[2 * i] = digits[md[i] >> 4];
		out[2 * i + 1] = digits[md[i] & 15];
	}
	out[2 * n] = '\0';
}

/* ---- the lanes ---- */

/*
 * A lane that cannot go on ends the download (under mu): the connections would
 * otherwise wait for it forever at the edge of their window.
 */
static void lane_failed_locked(struct dl *x, struct lane *l)
{
	if (!x->fail_rc) {
		x->fail_rc = l->err.code ? l->err.code : ISC_EIO;
		x->fail_err = l->err;
	}
	x->abort = 1;
	pthread_cond_broadcast(&x->main_cv);
}

static void *lane_main(void *arg)
{
	struct lane *l = arg;
	struct dl *x = l->x;
	unsigned char *buf = malloc(LANE_READ);

	pthread_mutex_lock(&x->mu);
	if (!buf) {
		l->failed = 1;
		isc_err_set(&l->err, ISC_ENOMEM, "out of memory");
		lane_failed_locked(x, l);
	}
	while (!x->quit && !l->failed) {
		uint64_t from = l->hashed, upto = x->written;
		ssize_t r;
		double t = x->tr ? now_ms() : 0;
		if (x->paused || from >= upto) {
			pthread_cond_wait(&x->cv, &x->mu);
			if (x->tr)
				x->tr->lane_wait[l->id] += now_ms() - t;
			continue;
		}
		if (upto - from > LANE_READ)
			upto = from + LANE_READ;
		l->busy = 1;
		pthread_mutex_unlock(&x->mu);
		r = pread(l->fd, buf, (size_t)(upto - from), (off_t)from);
		if (r > 0)
			lane_update(x, &x->h, l->id, buf, (size_t)r);
		pthread_mutex_lock(&x->mu);
		if (x->tr) {
			x->tr->lane_busy[l->id] += now_ms() - t;
			x->tr->lane_reads[l->id]++;
		}
		l->busy = 0;
		if (r > 0) {
			l->hashed += (uint64_t)r;
		} else if (!(r < 0 && errno == EINTR)) {
			l->failed = 1;
			isc_err_set(&l->err, ISC_EIO, "%s: reading back: %s", x->d->path,
			            r < 0 ? strerror(errno) : "shorter than written");
		}
		if (l->failed)
			lane_failed_locked(x, l);
		pthread_cond_broadcast(&x->cv);
	}
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->mu);
	free(buf);
	return NULL;
}

/* The least any lane has hashed (under mu). */
static uint64_t lanes_hashed_locked(const struct dl *x)
{
	uint64_t least = UINT64_MAX;
	for (int i = 0; i < 2; i++)
		if (x->lanes[i].on && x->lanes[i].hashed < least)
			least = x->lanes[i].hashed;
	return least == UINT64_MAX ? x->written : least;
}

/* Waits until every lane has hashed all that was written; a lane's failure is returned. */
static int lanes_drain(struct dl *x, struct isc_err *err)
{
	int rc = 0;
	pthread_mutex_lock(&x->mu);
	for (;;) {
		int behind = 0;
		for (int i = 0; i < 2; i++) {
			struct lane *l = &x->lanes[i];
			if (l->on && l->failed && !rc) {
				rc = l->err.code ? l->err.code : ISC_EIO;
				if (err)
					*err = l->err;
			}
			if (l->on && !l->failed && l->hashed < x->written)
				behind = 1;
		}
		if (rc || !behind)
			break;
		pthread_cond_wait(&x->cv, &x->mu);
	}
	pthread_mutex_unlock(&x->mu);
	return rc;
}

/*
 * The range at the watermark is fetched again after the lanes hashed part of
 * its first try (under mu): the lanes start over from byte 0 and read the kept
 * bytes back. Rare, so simpler than saving every digest at every range start.
 */
static int lanes_rewind_locked(struct dl *x, uint64_t watermark, struct isc_err *err)
{
	int rc = 0;
	x->paused = 1;
	while (x->lanes[0].busy || x->lanes[1].busy)
		pthread_cond_wait(&x->cv, &x->mu);
	hashes_free(&x->h);
	if (hashes_init(x, &x->h))
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	x->lanes[0].hashed = x->lanes[1].hashed = 0;
	x->written = x->told = watermark;
	x->paused = 0;
	pthread_cond_broadcast(&x->cv);
	return rc;
}

static int lanes_start(struct dl *x, struct isc_err *err)
{
	x->lanes[0].on = 1;
	x->lanes[1].on = (x->md5_on && !x->md5_multi) || lane_md5_parts(x) || crc_on(x);
	for (int i = 0; i < 2; i++) {
		struct lane *l = &x->lanes[i];
		l->x = x;
		l->id = i;
		l->fd = -1;
		if (!l->on)
			continue;
		l->fd = open(x->d->path, O_RDONLY | O_CLOEXEC);
		if (l->fd < 0)
			return isc_err_set(err, ISC_EIO, "%s: %s", x->d->path, strerror(errno));
		if (pthread_create(&l->thread, NULL, lane_main, l) != 0)
			return isc_err_set(err, ISC_EIO, "cannot start a hashing thread");
		l->started = 1;
	}
	return 0;
}

static void lanes_stop(struct dl *x)
{
	pthread_mutex_lock(&x->mu);
	x->quit = 1;
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->mu);
	for (int i = 0; i < 2; i++) {
		if (x->lanes[i].started)
			pthread_join(x->lanes[i].thread, NULL);
		if (x->lanes[i].fd >= 0)
			close(x->lanes[i].fd);
		x->lanes[i].started = 0;
		x->lanes[i].fd = -1;
	}
}

/* ---- the marker ---- */

static char *marker_path(const char *path)
{
	char *m = NULL;
	return asprintf(&m, "%s.sync", path) < 0 ? NULL : m;
}

static size_t ranges_of(uint64_t size, uint64_t range_bytes)
{
	return (size_t)((size + range_bytes - 1) / range_bytes);
}

/*
 * The ranges the marker beside path says are durable: *range_bytes and *bits
 * ('0'/'1' per range, caller frees). 0 when there is no usable marker for an
 * object of `size` bytes (start over).
 */
static int marker_read(const char *path, uint64_t size, uint64_t *range_bytes, char **bits)
{
	char *m = marker_path(path), *text = NULL, word[16];
	FILE *f = m ? fopen(m, "r") : NULL;
	unsigned long long r = 0, sz = 0, off = 0;
	size_t cap, n, len;
	int ok = 0;

	*bits = NULL;
	free(m);
	if (!f)
		return 0;
	cap = (size_t)(size / RANGE_MIN) + 128;
	text = calloc(1, cap + 1);
	len = text ? fread(text, 1, cap, f) : 0;
	fclose(f);
	if (!text)
		return 0;
	text[len] = '\0';
	if (sscanf(text, "%15s", word) == 1 && strcmp(word, "ranges") == 0) {
		char *b = NULL;
		int at = 0;
		if (sscanf(text, "ranges %llu %llu %n", &r, &sz, &at) == 2 && at > 0 &&
		    r >= RANGE_MIN && r <= RANGE_MAX && sz == size) {
			b = text + at;
			n = strspn(b, "01");
			if (n == ranges_of(size, r) && (b[n] == '\n' || b[n] == '\0')) {
				*range_bytes = r;
				*bits = strndup(b, n);
				ok = *bits != NULL;
			}
		}
	} else if (sscanf(text, "%*s %llu", &off) == 1) {
		/* The single-connection format, "BOOT OFFSET": durable up to OFFSET. */
		n = ranges_of(size, OLD_RANGE_BYTES);
		*bits = malloc(n + 1);
		if (*bits) {
			for (size_t i = 0; i < n; i++) {
				uint64_t end = (uint64_t)(i + 1) * OLD_RANGE_BYTES;
				(*bits)[i] = (end < size ? end : size) <= off ? '1' : '0';
			}
			(*bits)[n] = '\0';
			*range_bytes = OLD_RANGE_BYTES;
			ok = 1;
		}
	}
	free(text);
	return ok;
}

/*
 * Records which ranges are durable (every range marked done was fdatasync'd
 * before it was marked): to a temporary file, fdatasync'd, renamed over the
 * marker. Under marker_mu, so markers are written in the order of the states
 * they record.
 */
static int marker_write(struct dl *x, struct isc_err *err)
{
	char *m = marker_path(x->d->path), *tmp = NULL;
	FILE *f;
	int rc = 0;
	if (!m || asprintf(&tmp, "%s.tmp", m) < 0) {
		free(m);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	pthread_mutex_lock(&x->mu);
	for (size_t i = 0; i < x->nranges; i++)
		x->marker_bits[i] = x->state[i] == R_DONE ? '1' : '0';
	x->marker_bits[x->nranges] = '\0';
	pthread_mutex_unlock(&x->mu);
	f = fopen(tmp, "w");
	if (!f ||
	    fprintf(f, "ranges %" PRIu64 " %" PRIu64 " %s\n", x->range_bytes, x->d->object->size,
	            x->marker_bits) < 0 ||
	    fflush(f) || fdatasync(fileno(f)) || rename(tmp, m))
		rc = isc_err_set(err, ISC_EIO, "%s: %s", m, strerror(errno));
	if (f)
		fclose(f);
	free(tmp);
	free(m);
	return rc;
}

/* ---- the connections ---- */

/* The first failure ends the download: every connection stops (under mu). */
static void fail_locked(struct dl *x, int rc, const struct isc_err *err)
{
	if (!x->fail_rc) {
		x->fail_rc = rc;
		if (err)
			x->fail_err = *err;
	}
	x->abort = 1;
	pthread_cond_broadcast(&x->cv);
	pthread_cond_broadcast(&x->main_cv);
}

/*
 * The watermark after the blocks written in order and what the next one holds
 * so far (under mu). The lanes are woken when it has moved a lane's read (or a
 * block ended, `force`), not for every piece libcurl hands over: a wake per
 * 64 KiB kept every thread busy waking the others.
 */
static void watermark_locked(struct dl *x, int force)
{
	uint64_t size = x->d->object->size, w;
	while (x->prefix < x->nranges && x->state[x->prefix] >= R_WRITTEN)
		x->prefix++;
	w = (uint64_t)x->prefix * x->range_bytes;
	if (x->prefix < x->nranges && x->state[x->prefix] == R_FLIGHT)
		w += x->got[x->prefix];
	if (w > size)
		w = size;
	if (w > x->written)
		x->written = w;
	if (force || x->written >= x->told + LANE_READ || x->written == size) {
		x->told = x->written;
		pthread_cond_broadcast(&x->cv);
	}
}

/* The part MD5s of bytes at offset `at`: a run starts at a part boundary. */
static void conn_parts_update(struct conn *c, uint64_t at, const unsigned char *p, size_t n)
{
	struct dl *x = c->x;
	const uint64_t part = x->d->part_size, size = x->d->object->size;
	while (n) {
		uint64_t idx = at / part, end = (idx + 1) * part;
		size_t take = n;
		if (end > size)
			end = size;
		if (take > end - at)
			take = (size_t)(end - at);
		EVP_DigestUpdate(c->pmd5, p, take);
		at += take;
		p += take;
		n -= take;
		if (at == end) {
			unsigned int mdn = 0;
			EVP_DigestFinal_ex(c->pmd5, x->part_md5 + idx * 16, &mdn);
			EVP_DigestInit_ex(c->pmd5, EVP_md5(), NULL);
		}
	}
}

static int conn_begin(void *ctx, struct isc_err *err)
{
	struct conn *c = ctx;
	struct dl *x = c->x;
	int rc = 0;
	/*
	 * A retried run starts over from its first byte (the S3 client asks for the
	 * same range again, If-Match the ETag, so the bytes are the same). Blocks it
	 * already wrote stay written; the block it was in starts over, and the lanes
	 * too if they read any of it.
	 */
	if (c->pos == 0)
		return 0;
	pthread_mutex_lock(&x->mu);
	for (size_t b = c->range; b < c->blk_end; b++)
		if (x->state[b] == R_FLIGHT) {
			x->got[b] = 0;
			if (b == x->prefix && x->written > (uint64_t)b * x->range_bytes)
				rc = lanes_rewind_locked(x, (uint64_t)b * x->range_bytes, err);
			break;
		}
	pthread_mutex_unlock(&x->mu);
	c->pos = 0;
	c->blk = c->range;
	c->writeback_from = 0;
	if (c->pmd5)
		EVP_DigestInit_ex(c->pmd5, EVP_md5(), NULL);
	return rc;
}

/* The blocks of the run the bytes so far complete are WRITTEN (under mu). */
static void conn_blocks_locked(struct conn *c)
{
	struct dl *x = c->x;
	const uint64_t size = x->d->object->size, at = c->first + c->pos;
	int ended = 0;
	while (c->blk < c->blk_end) {
		uint64_t start = (uint64_t)c->blk * x->range_bytes, end = start + x->range_bytes;
		if (end > size)
			end = size;
		if (at < end) {
			if (x->state[c->blk] == R_FLIGHT)
				x->got[c->blk] = at - start;
			break;
		}
		if (x->state[c->blk] == R_FLIGHT) {
			x->state[c->blk] = R_WRITTEN;
			x->got[c->blk] = end - start;
			trace_at(x, c->blk, T_LAST);
			ended = 1;
		}
		c->blk++;
	}
	if (c->range <= x->prefix || ended)
		watermark_locked(x, ended);
}

static int conn_write(void *ctx, const struct isc_http_response *resp, const void *data, size_t n,
                      struct isc_err *err)
{
	struct conn *c = ctx;
	struct dl *x = c->x;
	const unsigned char *p = data;
	(void)resp;
	if (x->abort || (x->d->stop && *x->d->stop))
		return isc_err_set(err, ISC_EIO, "stopped"); /* not retried; reported as a stop */
	for (size_t off = 0; off < n;) {
		ssize_t w = pwrite(x->fd, p + off, n - off, (off_t)(c->first + c->pos + off));
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return isc_err_set(err, ISC_EIO, "%s: %s", x->d->path, strerror(errno));
		off += (size_t)w;
	}
	if (c->pmd5)
		conn_parts_update(c, c->first + c->pos, p, n);
	if (x->tr)
		trace_at(x, c->blk, T_FIRST);
	c->pos += n;
	pthread_mutex_lock(&x->mu);
	conn_blocks_locked(c);
	pthread_mutex_unlock(&x->mu);
	if (c->pos - c->writeback_from >= WRITEBACK_BYTES) {
		/* Start writeback now, without waiting, so the run's fdatasync finds little. */
		sync_file_range(x->fd, (off64_t)(c->first + c->writeback_from),
		                (off64_t)(c->pos - c->writeback_from), SYNC_FILE_RANGE_WRITE);
		c->writeback_from = c->pos;
	}
	return 0;
}

/*
 * One run of blocks from S3 into the file: one GET on the kept-alive
 * connection. Each block is WRITTEN as its last byte lands; making it durable
 * is conn_main's once the whole run is in.
 */
static int conn_fetch(struct conn *c, struct isc_err *err)
{
	struct dl *x = c->x;
	const struct isc_dataset_download *d = x->d;
	struct isc_http_sink sink = {conn_begin, conn_write, c};
	int rc;

	c->pos = c->writeback_from = 0;
	c->blk = c->range;
	if (c->pmd5)
		EVP_DigestInit_ex(c->pmd5, EVP_md5(), NULL);
	trace_at(x, c->range, T_ASK);
	rc = isc_s3_get_range_to(c->client, d->bucket, d->object->key, d->version_id,
	                         d->object->etag, c->first, c->len, &sink, err);
	if (rc == ISC_ECONFLICT)
		rc = isc_err_set(err, ISC_ECONFLICT,
		                 "s3://%s/%s changed while it was being cached (ETag is no longer "
		                 "%s)",
		                 d->bucket, d->object->key, d->object->etag);
	return rc;
}

/* The part MD5s of a block kept from before a crash, read back from the file. */
static int conn_rehash(struct conn *c, struct isc_err *err)
{
	struct dl *x = c->x;
	unsigned char *buf = malloc(REHASH_READ);
	int rc = 0;
	if (!buf)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	EVP_DigestInit_ex(c->pmd5, EVP_md5(), NULL);
	for (uint64_t at = 0; at < c->len && !rc && !x->abort;) {
		size_t want = c->len - at < REHASH_READ ? (size_t)(c->len - at) : REHASH_READ;
		ssize_t r = pread(x->fd, buf, want, (off_t)(c->first + at));
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			rc = isc_err_set(err, ISC_EIO, "%s: reading back: %s", x->d->path,
			                 r < 0 ? strerror(errno) : "shorter than recorded");
		else {
			conn_parts_update(c, c->first + at, buf, (size_t)r);
			at += (uint64_t)r;
		}
	}
	free(buf);
	return rc;
}

/*
 * The next run for a connection (under mu): a resumed block to rehash, else
 * the lowest blocks nobody has taken, if within the window ahead of the lanes.
 * A run is as many blocks as todo / (2 x connections), 1..RANGE_MAX: long
 * GETs while much is left, so a request's set-up is paid seldom, and single
 * blocks at the end, so the connections finish together and the in-order
 * hashing is left little to read after the last byte. *n: its blocks.
 * NO_RANGE with *wait set: come back later; without: nothing is left.
 */
static size_t claim_locked(struct dl *x, size_t *n, int *rehash, int *wait)
{
	const size_t per_run =
	    (size_t)(RANGE_MAX / x->range_bytes) ? (size_t)(RANGE_MAX / x->range_bytes) : 1;
	const uint64_t window = (uint64_t)WINDOW_PER_CONN * (uint64_t)x->nconns * per_run;
	const size_t hashed_blk = (size_t)(lanes_hashed_locked(x) / x->range_bytes);
	size_t want;
	*rehash = *wait = 0;
	*n = 1;
	for (size_t i = 0; i < x->nranges; i++)
		if (x->rehash[i] == 1) {
			x->rehash[i] = 2;
			*rehash = 1;
			return i;
		}
	want = x->todo / (2 * (size_t)x->nconns);
	want = want < 1 ? 1 : want > per_run ? per_run : want;
	for (size_t i = x->prefix; i < x->nranges; i++) {
		size_t k = 0;
		if (x->state[i] != R_TODO)
			continue;
		if ((uint64_t)i >= (uint64_t)hashed_blk + window) {
			*wait = 1;
			return NO_RANGE;
		}
		while (k < want && i + k < x->nranges && x->state[i + k] == R_TODO &&
		       (uint64_t)(i + k) < (uint64_t)hashed_blk + window) {
			x->state[i + k] = R_FLIGHT;
			x->got[i + k] = 0;
			k++;
		}
		x->todo -= k;
		*n = k;
		return i;
	}
	return NO_RANGE;
}

static void *conn_main(void *arg)
{
	struct conn *c = arg;
	struct dl *x = c->x;
	const uint64_t size = x->d->object->size;

	for (;;) {
		struct isc_err err;
		int rehash = 0, wait = 0, rc;
		size_t i = NO_RANGE, n = 1;

		isc_err_clear(&err);
		pthread_mutex_lock(&x->mu);
		while (!x->abort && (i = claim_locked(x, &n, &rehash, &wait)) == NO_RANGE && wait) {
			double t = x->tr ? now_ms() : 0;
			pthread_cond_wait(&x->cv, &x->mu);
			if (x->tr)
				x->tr->conn_window_wait[c - x->conns] += now_ms() - t;
		}
		if (!rehash && i != NO_RANGE)
			trace_at(x, i, T_CLAIM);
		pthread_mutex_unlock(&x->mu);
		if (x->abort || i == NO_RANGE)
			break;
		c->range = c->blk = i;
		c->blk_end = i + n;
		c->first = (uint64_t)i * x->range_bytes;
		c->len = (uint64_t)(i + n) * x->range_bytes;
		c->len = (c->len < size ? c->len : size) - c->first;
		rc = rehash ? conn_rehash(c, &err) : conn_fetch(c, &err);
		if (rc) {
			pthread_mutex_lock(&x->mu);
			/* A connection stopped by another's failure or a stop adds nothing. */
			if (!x->abort)
				fail_locked(x, rc, &err);
			pthread_mutex_unlock(&x->mu);
			break;
		}
		if (rehash) {
			pthread_mutex_lock(&x->mu);
			x->rehash[i] = 0;
			x->left--;
			pthread_cond_broadcast(&x->main_cv);
			pthread_mutex_unlock(&x->mu);
			continue;
		}
		/*
		 * The run is durable, then marked, before its connection asks for more.
		 * A sync thread that made written blocks durable while the connections
		 * went on writing was measured slower, and far less steady (2.3-7.2 s
		 * against 2.3-2.4 s, 512 MiB on 4 x 100 MiB/s, loaded machine): an
		 * fdatasync racing writers to the same file stalls them, where a
		 * connection syncing its own run is its own back-pressure.
		 */
		if (fdatasync(x->fd) != 0)
			rc = isc_err_set(&err, ISC_EIO, "%s: %s", x->d->path, strerror(errno));
		if (!rc) {
			pthread_mutex_lock(&x->marker_mu);
			pthread_mutex_lock(&x->mu);
			for (size_t b = i; b < i + n; b++)
				if (x->state[b] == R_WRITTEN) {
					x->state[b] = R_DONE;
					x->left--;
					trace_at(x, b, T_SYNC);
				}
			pthread_mutex_unlock(&x->mu);
			rc = marker_write(x, &err);
			pthread_mutex_unlock(&x->marker_mu);
			trace_at(x, i, T_MARK);
		}
		pthread_mutex_lock(&x->mu);
		if (rc)
			fail_locked(x, rc, &err);
		pthread_cond_broadcast(&x->main_cv);
		pthread_mutex_unlock(&x->mu);
		if (rc)
			break;
	}
	return NULL;
}

static int conns_start(struct dl *x, struct isc_err *err)
{
	for (int i = 0; i < x->nconns; i++) {
		struct conn *c = &x->conns[i];
		int rc;
		c->x = x;
		if (i == 0) {
			c->client = x->d->client;
		} else {
			if ((rc = isc_s3_client_dup(x->d->client, &c->client, err)))
				return rc;
			c->own_client = 1;
		}
		if (x->parts_by_conn && md_new(&c->pmd5, EVP_md5()))
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	for (int i = 0; i < x->nconns; i++) {
		if (pthread_create(&x->conns[i].thread, NULL, conn_main, &x->conns[i]) != 0) {
			pthread_mutex_lock(&x->mu);
			x->abort = 1;
			pthread_cond_broadcast(&x->cv);
			pthread_mutex_unlock(&x->mu);
			return isc_err_set(err, ISC_EIO, "cannot start a download thread");
		}
		x->conns[i].started = 1;
	}
	return 0;
}

static void conns_stop(struct dl *x)
{
	if (!x->conns)
		return;
	pthread_mutex_lock(&x->mu);
	x->abort = 1;
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->mu);
	for (int i = 0; i < x->nconns; i++) {
		struct conn *c = &x->conns[i];
		if (c->started)
			pthread_join(c->thread, NULL);
		if (c->own_client)
			isc_s3_client_free(c->client);
		EVP_MD_CTX_free(c->pmd5);
	}
	free(x->conns);
	x->conns = NULL;
}

/* The checks, once every byte went through the digests; out->by says what was checked. */
static int verify(struct dl *x, struct isc_dataset_verified *out, struct isc_err *err)
{
	const struct isc_s3_object *o = x->d->object;
	unsigned char md[EVP_MAX_MD_SIZE], sha[EVP_MAX_MD_SIZE];
	unsigned n, sha_n;
	char got[160];
	int w = 0;

	const int ck_lane = x->ck == CK_SHA256 ? 0 : 1;
	for (int lane = 0; lane < 2; lane++)
		if (lane_parted(x, lane) && (x->h.in_part[lane] || x->h.parts[lane] == 0))
			part_close(x, &x->h, lane);
	EVP_DigestFinal_ex(x->h.sha, sha, &sha_n);
	hex(sha, sha_n, out->sha256);
	out->by[0] = '\0';
	if (x->md5_on) {
		unsigned long want_parts = 0;
		if (x->md5_multi && x->parts_by_conn) {
			/* The connections' part MD5s, in order. */
			EVP_MD_CTX *outer = EVP_MD_CTX_new();
			if (!outer || EVP_DigestInit_ex(outer, EVP_md5(), NULL) != 1 ||
			    EVP_DigestUpdate(outer, x->part_md5, x->nparts * 16) != 1 ||
			    EVP_DigestFinal_ex(outer, md, &n) != 1) {
				EVP_MD_CTX_free(outer);
				return isc_err_set(err, ISC_ENOMEM, "out of memory");
			}
			EVP_MD_CTX_free(outer);
			x->h.parts[1] = x->nparts;
			want_parts = strtoul(strchr(o->etag, '-') + 1, NULL, 10);
		} else if (x->md5_multi) {
			EVP_DigestFinal_ex(x->h.md5_outer, md, &n);
			want_parts = strtoul(strchr(o->etag, '-') + 1, NULL, 10);
		} else {
			EVP_DigestFinal_ex(x->h.md5, md, &n);
		}
		hex(md, n, got);
		if (strncasecmp(got, o->etag, 32) != 0 ||
		    (x->md5_multi && x->h.parts[1] != want_parts))
			return x->md5_multi
			           ? isc_err_set(
			                 err, ISC_ECONFLICT,
			                 "the downloaded bytes do not match the ETag %s (%" PRIu64
			                 " parts of %" PRIu64 " bytes give %s-%" PRIu64 ")",
			                 o->etag, x->h.parts[1], x->d->part_size, got,
			                 x->h.parts[1])
			           : isc_err_set(
			                 err, ISC_ECONFLICT,
			                 "the downloaded bytes do not match the ETag %s (their "
			                 "MD5 is %s)",
			                 o->etag, got);
		if (x->md5_multi)
			w = snprintf(out->by, sizeof(out->by), "ETag (MD5 of %" PRIu64 " parts)",
			             x->h.parts[1]);
		else
			w = snprintf(out->by, sizeof(out->by), "ETag (MD5)");
	}
	if (x->ck != CK_NONE) {
		unsigned char raw[EVP_MAX_MD_SIZE];
		unsigned rn = 0;
		char b64[96];
		size_t vlen = strcspn(o->checksum, "-");
		uint32_t crc = x->ck_comp ? x->h.crc_outer : x->h.crc;
		if (x->ck == CK_SHA256 && x->ck_comp) {
			EVP_DigestFinal_ex(x->h.ck_outer, raw, &rn);
		} else if (x->ck == CK_SHA256) {
			memcpy(raw, sha, sha_n);
			rn = sha_n;
		} else {
			raw[0] = (unsigned char)(crc >> 24);
			raw[1] = (unsigned char)(crc >> 16);
			raw[2] = (unsigned char)(crc >> 8);
			raw[3] = (unsigned char)crc;
			rn = 4;
		}
		EVP_EncodeBlock((unsigned char *)b64, raw, (int)rn);
		if (x->ck_comp)
			snprintf(got, sizeof(got), "%s-%" PRIu64, b64, x->h.parts[ck_lane]);
		else
			snprintf(got, sizeof(got), "%s", b64);
		if (strlen(b64) != vlen || strncmp(b64, o->checksum, vlen) != 0 ||
		    (x->ck_comp && strcmp(got, o->checksum) != 0))
			return isc_err_set(err, ISC_ECONFLICT,
			                   "the downloaded bytes do not match S3's Checksum%s %s "
			                   "(they give %s)",
			                   o->checksum_algo, o->checksum, got);
		if (x->ck_comp)
			snprintf(out->by + w, sizeof(out->by) - (size_t)w,
			         "%sChecksum%s (composite, %" PRIu64 " parts)", w ? " and " : "",
			         o->checksum_algo, x->h.parts[ck_lane]);
		else
			snprintf(out->by + w, sizeof(out->by) - (size_t)w, "%sChecksum%s",
			         w ? " and " : "", o->checksum_algo);
	}
	if (!out->by[0])
		/* No digest of S3's to check: S3 itself served only bytes with this ETag. */
		snprintf(out->by, sizeof(out->by),
		         "If-Match on every range (the ETag is not an MD5%s%s; no checksum in S3)",
		         o->sse[0] ? ": " : "", o->sse);
	return 0;
}

/* ---- settings ---- */

int isc_dataset_parallelism_parse(const char *setting, int *out, struct isc_err *err)
{
	char *end = NULL;
	long v;
	*out = ISC_DATASET_PARALLELISM_DEFAULT;
	if (!setting || !setting[0])
		return 0;
	errno = 0;
	v = strtol(setting, &end, 10);
	if (errno || *end || end == setting || v < 1 || v > ISC_DATASET_PARALLELISM_MAX)
		return isc_err_set(err, ISC_EINVALID,
		                   "[providers.aws] s3_parallelism '%s' is not a number of "
		                   "connections from 1 to %d",
		                   setting, ISC_DATASET_PARALLELISM_MAX);
	*out = (int)v;
	return 0;
}

uint64_t isc_dataset_range_bytes(uint64_t size, uint64_t part_size, int parallelism)
{
	/*
	 * Small blocks, whatever the size and parallelism: a GET covers a run of
	 * them (claim_locked), so small blocks cost no extra requests, and they let
	 * the last GETs be short, so no connection finishes alone and the in-order
	 * hashing has at most a block per connection to read after the last byte.
	 */
	uint64_t r = RANGE_MIN;
	(void)size;
	(void)parallelism;
	if (part_size && part_size <= RANGE_MAX) {
		/* Whole parts, 8 MiB at least, so each run's part MD5s are its connection's. */
		uint64_t k = (RANGE_MIN + part_size - 1) / part_size;
		if (k * part_size > RANGE_MAX)
			k = RANGE_MAX / part_size;
		r = k * part_size;
	}
	return r;
}

/* ---- the download ---- */

/* Bytes of the object in the file (under mu): the ranges done and what those in flight hold. */
static uint64_t bytes_locked(const struct dl *x)
{
	const uint64_t size = x->d->object->size;
	uint64_t b = 0;
	for (size_t i = 0; i < x->nranges; i++) {
		uint64_t first = (uint64_t)i * x->range_bytes;
		uint64_t len = size - first < x->range_bytes ? size - first : x->range_bytes;
		b += x->state[i] >= R_WRITTEN ? len : x->state[i] == R_FLIGHT ? x->got[i] : 0;
	}
	return b;
}

/* ISC_DATASET_TRACE: the trace, once the ranges are known (see struct trace). */
static void trace_start(struct dl *x, double t0)
{
	const char *f = getenv("ISC_DATASET_TRACE");
	if (!f || !f[0] || !(x->tr = calloc(1, sizeof(*x->tr))))
		return;
	x->tr->t0 = t0;
	if (!(x->tr->at = calloc(x->nranges + 1, sizeof(*x->tr->at)))) {
		free(x->tr);
		x->tr = NULL;
	}
}

static void trace_end(struct dl *x, double drained, double verified)
{
	const char *f = getenv("ISC_DATASET_TRACE");
	FILE *o;
	if (!x->tr)
		return;
	if ((o = fopen(f, "a"))) {
		fprintf(o,
		        "object %" PRIu64 " bytes, ranges of %" PRIu64 ", %d connections; "
		        "all in at %.1f ms, hashed at %.1f; main wakes %lu\n",
		        x->d->object->size, x->range_bytes, x->nconns, drained, verified,
		        x->tr->main_wakes);
		for (int l = 0; l < 2; l++)
			fprintf(o, "lane %d: %.1f ms busy, %.1f ms waiting, %lu reads\n", l,
			        x->tr->lane_busy[l], x->tr->lane_wait[l], x->tr->lane_reads[l]);
		for (int c = 0; c < x->nconns; c++)
			fprintf(o, "conn %d: %.1f ms waiting for the window\n", c,
			        x->tr->conn_window_wait[c]);
		fprintf(o, "range claim ask first last sync mark\n");
		for (size_t i = 0; i < x->nranges; i++)
			fprintf(o, "%zu %.1f %.1f %.1f %.1f %.1f %.1f\n", i, x->tr->at[i][T_CLAIM],
			        x->tr->at[i][T_ASK], x->tr->at[i][T_FIRST], x->tr->at[i][T_LAST],
			        x->tr->at[i][T_SYNC], x->tr->at[i][T_MARK]);
		fclose(o);
	}
	free(x->tr->at);
	free(x->tr);
	x->tr = NULL;
}

/* The ranges (and what a resume keeps), the file at its full size, and the marker. */
static int plan(struct dl *x, int parallelism, struct isc_err *err)
{
	const struct isc_dataset_download *d = x->d;
	const uint64_t size = d->object->size;
	uint64_t r = 0;
	char *bits = NULL;
	struct stat st;

	if (fstat(x->fd, &st) != 0)
		return isc_err_set(err, ISC_EIO, "%s: %s", d->path, strerror(errno));
	/*
	 * No marker, or a file longer than the object: start over. A shorter one (the
	 * single-connection format wrote in order) is extended: only ranges marked
	 * done, and wholly in the file, are kept.
	 */
	if (size == 0 || (uint64_t)st.st_size > size || !marker_read(d->path, size, &r, &bits)) {
		free(bits);
		bits = NULL;
		r = isc_dataset_range_bytes(size, x->md5_multi ? d->part_size : 0, parallelism);
		if (ftruncate(x->fd, 0) != 0 || ftruncate(x->fd, (off_t)size) != 0)
			return isc_err_set(err, ISC_EIO, "%s: %s", d->path, strerror(errno));
	}
	x->range_bytes = r;
	x->nranges = ranges_of(size, r);
	x->parts_by_conn = x->md5_multi && size > 0 && r % d->part_size == 0;
	x->nparts = x->md5_multi ? (size_t)((size + d->part_size - 1) / d->part_size) : 0;
	if (x->md5_multi && x->nparts == 0)
		x->nparts = 1;
	x->state = calloc(x->nranges + 1, 1);
	x->rehash = calloc(x->nranges + 1, 1);
	x->got = calloc(x->nranges + 1, sizeof(*x->got));
	x->marker_bits = malloc(x->nranges + 1);
	x->part_md5 = x->parts_by_conn ? calloc(x->nparts, 16) : NULL;
	if (!x->state || !x->rehash || !x->got || !x->marker_bits ||
	    (x->parts_by_conn && !x->part_md5)) {
		free(bits);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	if (bits && (uint64_t)st.st_size < size && ftruncate(x->fd, (off_t)size) != 0) {
		free(bits);
		return isc_err_set(err, ISC_EIO, "%s: %s", d->path, strerror(errno));
	}
	x->left = x->todo = x->nranges;
	for (size_t i = 0; bits && i < x->nranges; i++) {
		uint64_t end = ((uint64_t)i + 1) * r < size ? ((uint64_t)i + 1) * r : size;
		if (bits[i] == '1' && end <= (uint64_t)st.st_size) {
			x->state[i] = R_DONE;
			x->todo--;
			if (x->parts_by_conn)
				x->rehash[i] = 1; /* its part MD5s are read back */
			else
				x->left--;
		}
	}
	free(bits);
	x->nconns = parallelism;
	if ((size_t)x->nconns > x->nranges)
		x->nconns = x->nranges ? (int)x->nranges : 0;
	watermark_locked(x, 1); /* no thread runs yet */
	return marker_write(x, err);
}

int isc_dataset_download_run(const struct isc_dataset_download *d, struct isc_dataset_verified *out,
                             struct isc_err *err)
{
	const struct isc_s3_object *o = d->object;
	const int parallelism = d->parallelism > 0 && d->parallelism <= ISC_DATASET_PARALLELISM_MAX
	                            ? d->parallelism
	                            : ISC_DATASET_PARALLELISM_DEFAULT;
	struct dl x;
	uint64_t reported = UINT64_MAX;
	double t0 = 0, t_in = 0, t_hashed = 0;
	int rc = 0;

	memset(&x, 0, sizeof(x));
	memset(out, 0, sizeof(*out));
	x.d = d;
	x.fd = x.lanes[0].fd = x.lanes[1].fd = -1;
	pthread_mutex_init(&x.mu, NULL);
	pthread_cond_init(&x.cv, NULL);
	pthread_cond_init(&x.main_cv, NULL);
	pthread_mutex_init(&x.marker_mu, NULL);
	x.md5_on = isc_s3_etag_is_md5(o);
	x.md5_multi = x.md5_on && strchr(o->etag, '-') != NULL;
	x.ck = strcmp(o->checksum_algo, "SHA256") == 0   ? CK_SHA256
	       : strcmp(o->checksum_algo, "CRC32C") == 0 ? CK_CRC32C
	       : strcmp(o->checksum_algo, "CRC32") == 0  ? CK_CRC32
	                                                 : CK_NONE;
	x.ck_comp = x.ck != CK_NONE && o->checksum_composite;
	if ((x.md5_multi || x.ck_comp) && d->part_size == 0) {
		rc = isc_err_set(err, ISC_EINVALID,
		                 "a multipart object needs its part size to be verified");
		goto out;
	}
	x.fd = open(d->path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (x.fd < 0) {
		rc = isc_err_set(err, ISC_EIO, "%s: %s", d->path, strerror(errno));
		goto out;
	}
	t0 = now_ms();
	if ((rc = plan(&x, parallelism, err)))
		goto out;
	trace_start(&x, t0);
	if (hashes_init(&x, &x.h)) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	x.conns = calloc((size_t)x.nconns + 1, sizeof(*x.conns));
	if (!x.conns) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	/* The lanes hash what a resumed file already holds first, then follow the watermark. */
	if ((rc = lanes_start(&x, err)) || (rc = conns_start(&x, err)))
		goto out;
	/* This thread reports progress (the callback may use the caller's store) and stops. */
	pthread_mutex_lock(&x.mu);
	while (x.left && !x.abort) {
		struct timespec until;
		uint64_t b = bytes_locked(&x);
		if (d->stop && *d->stop) {
			x.abort = 1;
			pthread_cond_broadcast(&x.cv);
			break;
		}
		if (d->progress && b != reported) {
			reported = b;
			pthread_mutex_unlock(&x.mu);
			d->progress(d->progress_ctx, b);
			pthread_mutex_lock(&x.mu);
		}
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += 250 * 1000000L;
		if (until.tv_nsec >= 1000000000L) {
			until.tv_sec++;
			until.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&x.main_cv, &x.mu, &until);
		if (x.tr)
			x.tr->main_wakes++;
	}
	pthread_mutex_unlock(&x.mu);
	conns_stop(&x);
	if (d->stop && *d->stop) {
		rc = isc_err_set(err, ISC_ETRANSIENT, "stopped");
		goto out;
	}
	if (x.fail_rc) {
		rc = x.fail_rc;
		if (err)
			*err = x.fail_err;
		goto out; /* the ranges done stay: a resume hashes them again and continues */
	}
	if (d->progress)
		d->progress(d->progress_ctx, o->size);
	t_in = now_ms() - t0;
	if ((rc = lanes_drain(&x, err)))
		goto out;
	lanes_stop(&x);
	t_hashed = now_ms() - t0;
	rc = verify(&x, out, err);
	if (x.tr)
		trace_end(&x, t_in, t_hashed);
	if (rc == ISC_ECONFLICT) {
		/* Wrong bytes are not resumed from: the next attempt starts over. */
		char *m = marker_path(d->path);
		unlink(d->path);
		if (m)
			unlink(m);
		free(m);
	}
out:
	conns_stop(&x);
	lanes_stop(&x);
	if (x.tr)
		trace_end(&x, t_in, t_hashed);
	if (x.fd >= 0)
		close(x.fd);
	hashes_free(&x.h);
	free(x.state);
	free(x.rehash);
	free(x.got);
	free(x.marker_bits);
	free(x.part_md5);
	pthread_cond_destroy(&x.cv);
	pthread_cond_destroy(&x.main_cv);
	pthread_mutex_destroy(&x.mu);
	pthread_mutex_destroy(&x.marker_mu);
	return rc;
}
