/*
 * The dataset download (download.h).
 *
 * Streaming: each range's body goes from libcurl's buffer straight to
 * write(2), so the bytes are never held in memory and iscd's footprint does
 * not grow with the range. Two hashing lanes (threads) read the file back
 * behind the writer, from the page cache, one feeding the SHA-256 and the
 * other the MD5 and CRC: hashing overlaps the download, and MD5 (the slowest,
 * and serial by nature) is alone on its lane. A range that libcurl retries (a
 * reset mid-body) truncates the file back and makes the lanes hash again from
 * byte 0; rare, and simpler than saving every digest at every range start.
 *
 * Durability and resume: writeback of each 8 MiB is started as it is written
 * (sync_file_range, which does not wait), and each range ends with fdatasync
 * and a marker PATH.sync holding "BOOT_ID OFFSET": the file is durable up to
 * OFFSET. On resume, if the machine has not rebooted since (same boot id) the
 * page cache still holds every byte write(2) accepted, so the whole file is
 * kept (a killed iscd loses nothing); after a reboot or power cut only OFFSET
 * bytes are trusted and the rest is fetched again. Either way the bytes kept
 * are hashed again once, from the file, before the download continues.
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
#include <unistd.h>

#define RANGE_BYTES     (64ull << 20) /* one GET: fewer requests; memory does not depend on it */
#define WRITEBACK_BYTES (8ull << 20)  /* start writeback this often */
#define LANE_READ       (1u << 20)    /* what a hashing lane reads back at a time */

enum ck_kind { CK_NONE, CK_SHA256, CK_CRC32C, CK_CRC32 };

/*
 * Every digest of one object. Two lanes update them, each its own fields:
 * lane 0 the SHA-256 (and a composite ChecksumSHA256), lane 1 the MD5 of the
 * ETag and a CRC checksum. in_part/parts count each lane's own parts.
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
 * A hashing lane: a thread that reads the file back behind the writer (from
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

struct dl {
	const struct isc_dataset_download *d;
	int md5_on, md5_multi; /* the ETag is an MD5 (of parts) */
	enum ck_kind ck;
	int ck_comp;
	struct hashes h;
	int fd;
	uint64_t have, range_start, writeback_from;
	int stopped;
	/* the lanes' shared state, under mu */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint64_t written; /* bytes in the file the lanes may read */
	int paused, quit;
	struct lane lanes[2];
};

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
	if (x->md5_multi) {
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

/* Whether lane `lane` splits the bytes into parts. */
static int lane_parted(const struct dl *x, int lane)
{
	return lane == 0 ? x->ck_comp && x->ck == CK_SHA256
	                 : x->md5_multi || (x->ck_comp && crc_on(x));
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
		if (x->md5_multi) {
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
			if (x->md5_multi)
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

static void *lane_main(void *arg)
{
	struct lane *l = arg;
	struct dl *x = l->x;
	unsigned char *buf = malloc(LANE_READ);

	pthread_mutex_lock(&x->mu);
	if (!buf) {
		l->failed = 1;
		isc_err_set(&l->err, ISC_ENOMEM, "out of memory");
	}
	while (!x->quit && !l->failed) {
		uint64_t from = l->hashed, upto = x->written;
		ssize_t r;
		if (x->paused || from >= upto) {
			pthread_cond_wait(&x->cv, &x->mu);
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
		l->busy = 0;
		if (r > 0) {
			l->hashed += (uint64_t)r;
		} else if (!(r < 0 && errno == EINTR)) {
			l->failed = 1;
			isc_err_set(&l->err, ISC_EIO, "%s: reading back: %s", x->d->path,
			            r < 0 ? strerror(errno) : "shorter than written");
		}
		pthread_cond_broadcast(&x->cv);
	}
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->mu);
	free(buf);
	return NULL;
}

/* The writer: bytes up to `written` are in the file for the lanes to read. */
static void lanes_publish(struct dl *x, uint64_t written)
{
	pthread_mutex_lock(&x->mu);
	x->written = written;
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->mu);
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
 * A retried range: the file goes back to `keep` bytes and hashing starts over
 * from byte 0 (the lanes read the kept bytes back). Rare, so simpler than
 * saving every digest's state at every range start.
 */
static int lanes_rewind(struct dl *x, uint64_t keep, struct isc_err *err)
{
	int rc = 0;
	pthread_mutex_lock(&x->mu);
	x->paused = 1;
	while (x->lanes[0].busy || x->lanes[1].busy)
		pthread_cond_wait(&x->cv, &x->mu);
	if (ftruncate(x->fd, (off_t)keep) != 0)
		rc = isc_err_set(err, ISC_EIO, "%s: %s", x->d->path, strerror(errno));
	hashes_free(&x->h);
	if (!rc && hashes_init(x, &x->h))
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	x->lanes[0].hashed = x->lanes[1].hashed = 0;
	x->written = keep;
	x->paused = 0;
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->mu);
	return rc;
}

static int lanes_start(struct dl *x, struct isc_err *err)
{
	x->lanes[0].on = 1;
	x->lanes[1].on = x->md5_on || crc_on(x);
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

/* ---- the sync marker ---- */

static void boot_id(char out[64])
{
	FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
	out[0] = '\0';
	if (f) {
		if (!fgets(out, 64, f))
			out[0] = '\0';
		fclose(f);
	}
	out[strcspn(out, "\r\n")] = '\0';
}

static char *marker_path(const char *path)
{
	char *m = NULL;
	return asprintf(&m, "%s.sync", path) < 0 ? NULL : m;
}

/* How many bytes of the file to keep: all of them on this boot, else the durable ones. */
static uint64_t marker_trust(const char *path, uint64_t size)
{
	char *m = marker_path(path), line[160], boot[64], now[64];
	unsigned long long off = 0;
	FILE *f = m ? fopen(m, "r") : NULL;
	uint64_t keep = 0;
	boot_id(now);
	if (f && fgets(line, sizeof(line), f) && sscanf(line, "%63s %llu", boot, &off) == 2)
		keep = now[0] && strcmp(boot, now) == 0 ? size : (uint64_t)off;
	if (f)
		fclose(f);
	free(m);
	return keep < size ? keep : size;
}

/* The file is durable up to off (after an fdatasync): say so, durably. */
static int marker_write(const char *path, uint64_t off, struct isc_err *err)
{
	char *m = marker_path(path), *tmp = NULL, boot[64];
	FILE *f;
	int rc = 0;
	if (!m || asprintf(&tmp, "%s.tmp", m) < 0) {
		free(m);
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	}
	boot_id(boot);
	f = fopen(tmp, "w");
	if (!f || fprintf(f, "%s %" PRIu64 "\n", boot[0] ? boot : "-", off) < 0 || fflush(f) ||
	    fdatasync(fileno(f)) || rename(tmp, m))
		rc = isc_err_set(err, ISC_EIO, "%s: %s", m, strerror(errno));
	if (f)
		fclose(f);
	free(tmp);
	free(m);
	return rc;
}

/* ---- the sink ---- */

static int sink_begin(void *ctx, struct isc_err *err)
{
	struct dl *x = ctx;
	/* A retried range: back to where it started. */
	if (x->have != x->range_start) {
		int rc = lanes_rewind(x, x->range_start, err);
		if (rc)
			return rc;
		x->have = x->range_start;
		if (x->writeback_from > x->have)
			x->writeback_from = x->have;
	}
	return 0;
}

static int sink_write(void *ctx, const struct isc_http_response *resp, const void *data, size_t n,
                      struct isc_err *err)
{
	struct dl *x = ctx;
	const unsigned char *p = data;
	(void)resp;
	if (x->d->stop && *x->d->stop) {
		x->stopped = 1;
		return isc_err_set(err, ISC_EIO, "stopped"); /* not retried; reported as a stop */
	}
	for (size_t off = 0; off < n;) {
		ssize_t w = write(x->fd, p + off, n - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return isc_err_set(err, ISC_EIO, "%s: %s", x->d->path, strerror(errno));
		off += (size_t)w;
	}
	x->have += n;
	lanes_publish(x, x->have);
	if (x->have - x->writeback_from >= WRITEBACK_BYTES) {
		/* Start writeback now, without waiting, so the range's fdatasync finds little to
		 * do. */
		sync_file_range(x->fd, (off64_t)x->writeback_from,
		                (off64_t)(x->have - x->writeback_from), SYNC_FILE_RANGE_WRITE);
		x->writeback_from = x->have;
		if (x->d->progress)
			x->d->progress(x->d->progress_ctx, x->have);
	}
	return 0;
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
		if (x->md5_multi) {
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

int isc_dataset_download_run(const struct isc_dataset_download *d, struct isc_dataset_verified *out,
                             struct isc_err *err)
{
	const struct isc_s3_object *o = d->object;
	struct dl x;
	struct isc_http_sink sink;
	struct stat st;
	int rc = 0;

	memset(&x, 0, sizeof(x));
	memset(out, 0, sizeof(*out));
	x.d = d;
	x.fd = x.lanes[0].fd = x.lanes[1].fd = -1;
	pthread_mutex_init(&x.mu, NULL);
	pthread_cond_init(&x.cv, NULL);
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
	if (hashes_init(&x, &x.h)) {
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		goto out;
	}
	x.fd = open(d->path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (x.fd < 0 || fstat(x.fd, &st) != 0) {
		rc = isc_err_set(err, ISC_EIO, "%s: %s", d->path, strerror(errno));
		goto out;
	}
	x.have = marker_trust(d->path, (uint64_t)st.st_size);
	if (x.have > o->size)
		x.have = 0; /* not this object's bytes */
	if (x.have != (uint64_t)st.st_size && ftruncate(x.fd, (off_t)x.have) != 0) {
		rc = isc_err_set(err, ISC_EIO, "%s: %s", d->path, strerror(errno));
		goto out;
	}
	if (x.have == 0 && (rc = marker_write(d->path, 0, err)))
		goto out;
	/* The lanes hash what a resumed file already holds first, then follow the writer. */
	x.written = x.have;
	x.writeback_from = x.have;
	if ((rc = lanes_start(&x, err)))
		goto out;
	sink = (struct isc_http_sink){sink_begin, sink_write, &x};
	while (x.have < o->size) {
		uint64_t len = o->size - x.have < RANGE_BYTES ? o->size - x.have : RANGE_BYTES;
		if (d->stop && *d->stop) {
			rc = isc_err_set(err, ISC_ETRANSIENT, "stopped");
			goto out;
		}
		x.range_start = x.have;
		rc = isc_s3_get_range_to(d->client, d->bucket, o->key, d->version_id, o->etag,
		                         x.have, len, &sink, err);
		if (rc && x.stopped) {
			rc = isc_err_set(err, ISC_ETRANSIENT, "stopped");
			goto out;
		}
		if (rc == ISC_ECONFLICT)
			rc = isc_err_set(err, ISC_ECONFLICT,
			                 "s3://%s/%s changed while it was being cached (ETag is no "
			                 "longer %s)",
			                 d->bucket, o->key, o->etag);
		if (rc)
			goto out; /* what arrived stays: a resume hashes it again and continues */
		/* The range boundary: durable, and said so. */
		if (fdatasync(x.fd) != 0) {
			rc = isc_err_set(err, ISC_EIO, "%s: %s", d->path, strerror(errno));
			goto out;
		}
		if ((rc = marker_write(d->path, x.have, err)))
			goto out;
		if (d->progress)
			d->progress(d->progress_ctx, x.have);
	}
	if ((rc = lanes_drain(&x, err)))
		goto out;
	lanes_stop(&x);
	rc = verify(&x, out, err);
	if (rc == ISC_ECONFLICT) {
		/* Wrong bytes are not resumed from: the next attempt starts over. */
		char *m = marker_path(d->path);
		unlink(d->path);
		if (m)
			unlink(m);
		free(m);
	}
out:
	lanes_stop(&x);
	if (x.fd >= 0)
		close(x.fd);
	hashes_free(&x.h);
	pthread_cond_destroy(&x.cv);
	pthread_mutex_destroy(&x.mu);
	return rc;
}
