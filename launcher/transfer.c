/*
 * The node's transfer engine: shell text for ranged parallel GETs and multipart
 * part PUTs through presigned URLs (launcher/transfer.h). Nothing here runs a
 * process: it writes what the node's bash runs, every URL taken from stdin into
 * 0600 files with builtins, never argv.
 */
#include "launcher/transfer.h"

#include "common/err.h"
#include "launcher/shellquote.h"

#include <inttypes.h>
#include <string.h>

uint64_t isc_transfer_part_size(uint64_t size)
{
	uint64_t ps;
	if (size > ISC_TRANSFER_MAX_FILE)
		return 0;
	/* About ISC_TRANSFER_PUT_PARALLEL x 2 parts, so a file keeps every connection busy,
	 * in whole MiB (the node's dd and the ETag check read MiB), from 8 to 64 MiB; more
	 * parts only when 10,000 of 64 MiB are needed. */
	ps =
	    (size / (2 * ISC_TRANSFER_PUT_PARALLEL) + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
	if (ps < ISC_TRANSFER_PART_MIN)
		ps = ISC_TRANSFER_PART_MIN;
	if (ps > ISC_TRANSFER_PART_MAX)
		ps = ISC_TRANSFER_PART_MAX;
	return ps;
}

unsigned isc_transfer_part_count(uint64_t size, uint64_t part_size)
{
	if (!part_size)
		return 0;
	if (!size)
		return 1;
	return (unsigned)((size + part_size - 1) / part_size);
}

int isc_transfer_url_ok(const char *url)
{
	if (!url || !url[0])
		return 0;
	for (const unsigned char *p = (const unsigned char *)url; *p; p++)
		if (*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\')
			return 0;
	return 1;
}

/* echo 'MSG' >&2; exit CODE (MSG quoted). */
static int fail(struct isc_buf *b, const char *msg, int code)
{
	int rc = isc_buf_puts(b, "echo ");
	rc |= isc_shell_quote(b, msg ? msg : "transfer failed");
	rc |= isc_buf_printf(b, " >&2; exit %d", code);
	return rc;
}

int isc_transfer_get_script(const struct isc_transfer_get *g, struct isc_buf *b)
{
	int rc = 0, par = g->parallel > 0 ? g->parallel : ISC_TRANSFER_PARALLEL;
	const char *hdr = g->header && g->header[0] ? g->header : "Accept: */*";
	const char *dash = g->etag_md5 ? strchr(g->etag_md5, '-') : NULL;

	if (dash && (!g->part_size || (g->part_size & ((1u << 20) - 1))))
		return ISC_EINVALID; /* the per-part MD5s are read in whole MiB */
	rc |= isc_buf_printf(b, "(umask 077; printf 'url = \"%%s\"\\n' \"$%s\" >", g->url_var);
	rc |= isc_buf_puts(b, g->conf);
	rc |= isc_buf_puts(b, "); h=");
	rc |= isc_shell_quote(b, hdr);
	if (g->size == ISC_TRANSFER_SIZE_PROBE) {
		/* The size from Content-Range of a 1-byte range; an object that gives none is
		 * fetched whole below. */
		rc |= isc_buf_puts(b, "; s=$(curl -fsS --retry 3 -K ");
		rc |= isc_buf_puts(b, g->conf);
		rc |= isc_buf_puts(
		    b, " -H \"$h\" -r 0-0 -o /dev/null -D - 2>/dev/null | tr -d '\\r' | sed -n "
		       "'s,^[Cc]ontent-[Rr]ange: bytes 0-0/,,p')");
	} else {
		rc |= isc_buf_printf(b, "; s=%" PRIu64, g->size);
	}
	/* Each range written at its offset (dd seek, conv=notrunc) and retried alone (curl
	 * --retry, its own backoff): one S3 connection gets about 100 MB/s. */
	rc |= isc_buf_puts(b, "; { if [ \"${s:-0}\" -gt 0 ] 2>/dev/null; then : >");
	rc |= isc_buf_puts(b, g->dest);
	rc |= isc_buf_printf(b,
	                     " && seq 0 %u $((s - 1)) | xargs -P %d -I{} bash -o pipefail -c "
	                     "'curl -fsS --retry 3 -K \"$1\" -H \"$2\" -r \"$3-$(($3 + %u))\" | "
	                     "dd of=\"$4\" bs=1048576 seek=$(($3 / 1048576)) conv=notrunc "
	                     "2>/dev/null' _ ",
	                     ISC_TRANSFER_RANGE, par, ISC_TRANSFER_RANGE - 1);
	rc |= isc_buf_puts(b, g->conf);
	rc |= isc_buf_puts(b, " \"$h\" {} ");
	rc |= isc_buf_puts(b, g->dest);
	rc |= isc_buf_puts(b, "; else curl -fsS --retry 3 -K ");
	rc |= isc_buf_puts(b, g->conf);
	rc |= isc_buf_puts(b, " -H \"$h\" -o ");
	rc |= isc_buf_puts(b, g->dest);
	rc |= isc_buf_puts(b, "; fi; } || { rm -f ");
	rc |= isc_buf_puts(b, g->conf);
	rc |= isc_buf_puts(b, "; ");
	rc |= fail(b, g->fail_msg, g->fail_code);
	rc |= isc_buf_puts(b, "; }; rm -f ");
	rc |= isc_buf_puts(b, g->conf);
	rc |= isc_buf_puts(b, "; ");
	if (g->size != ISC_TRANSFER_SIZE_PROBE) {
		rc |= isc_buf_printf(b, "[ \"$(stat -c %%s ");
		rc |= isc_buf_puts(b, g->dest);
		rc |= isc_buf_printf(b, ")\" = %" PRIu64 " ] || { ", g->size);
		rc |= fail(b, g->check_msg, g->fail_code);
		rc |= isc_buf_puts(b, "; }; ");
	}
	if (g->sha256) {
		/* openssl's SHA-256 uses the CPU's SHA instructions where the node has them:
		 * coreutils' sha256sum is 3-5x slower. */
		rc |= isc_buf_puts(b, "[ \"$({ command -v openssl >/dev/null && openssl dgst "
		                      "-sha256 -r || sha256sum; } < ");
		rc |= isc_buf_puts(b, g->dest);
		rc |= isc_buf_puts(b, " | cut -d' ' -f1)\" = ");
		rc |= isc_shell_quote(b, g->sha256);
		rc |= isc_buf_puts(b, " ] || { ");
		rc |= fail(b, g->check_msg, g->fail_code);
		rc |= isc_buf_puts(b, "; }; ");
	}
	if (g->etag_md5 && !dash) {
		rc |= isc_buf_puts(b, "[ \"$({ command -v openssl >/dev/null && openssl dgst -md5 "
		                      "-r || md5sum; } < ");
		rc |= isc_buf_puts(b, g->dest);
		rc |= isc_buf_puts(b, " | cut -d' ' -f1)\" = ");
		rc |= isc_shell_quote(b, g->etag_md5);
		rc |= isc_buf_puts(b, " ] || { ");
		rc |= fail(b, g->check_msg, g->fail_code);
		rc |= isc_buf_puts(b, "; }; ");
	} else if (g->etag_md5) {
		/* A multipart object's ETag: the MD5 of its parts' binary MD5s, then "-N". */
		rc |= isc_buf_printf(b,
		                     "[ \"$(i=0; while [ $i -eq 0 ] || [ $((i * %" PRIu64
		                     ")) -lt $s ]; do dd if=",
		                     g->part_size);
		rc |= isc_buf_puts(b, g->dest);
		rc |= isc_buf_printf(b,
		                     " bs=1048576 skip=$((i * %" PRIu64 ")) count=%" PRIu64
		                     " 2>/dev/null | openssl dgst -md5 -binary; i=$((i + 1)); "
		                     "done | openssl dgst -md5 -r | cut -d' ' -f1)%s\" = ",
		                     g->part_size >> 20, g->part_size >> 20, dash);
		rc |= isc_shell_quote(b, g->etag_md5);
		rc |= isc_buf_puts(b, " ] || { ");
		rc |= fail(b, g->check_msg, g->fail_code);
		rc |= isc_buf_puts(b, "; }; ");
	}
	return rc ? ISC_ENOMEM : 0;
}

int isc_transfer_read_lines(const char *file, size_t n, struct isc_buf *b)
{
	int rc = isc_buf_printf(b,
	                        "(umask 077; i=0; while [ $i -lt %zu ]; do IFS= read -r l || "
	                        "break; printf '%%s\\n' \"$l\"; i=$((i + 1)); done >",
	                        n);
	rc |= isc_buf_puts(b, file);
	rc |= isc_buf_puts(b, "); ");
	return rc ? ISC_ENOMEM : 0;
}

int isc_transfer_put_script(const struct isc_transfer_put *p, struct isc_buf *b)
{
	int par = p->parallel > 0 ? p->parallel : ISC_TRANSFER_PUT_PARALLEL;
	int rc = isc_buf_puts(b, "seq 1 $(wc -l <");
	rc |= isc_buf_puts(b, p->dir);
	/*
	 * One worker per part: its line read by sed (output, not argv), the URL into a
	 * 0600 curl config, the bytes read at the part's offset by dd and PUT with their
	 * Content-Length and no Transfer-Encoding (curl 7.88 sends "chunked" beside a given
	 * Content-Length on -T -, which S3 refuses with 501 NotImplemented; an empty
	 * Transfer-Encoding: header turns it off), Expect: off (one round trip less), three
	 * tries (a pipe cannot be
	 * rewound by curl --retry). Its ETag goes to stdout as "K PART ETAG".
	 */
	rc |= isc_buf_printf(
	    b,
	    "/parts) | xargs -P %d -I{} bash -o pipefail -c 'sed -n \"$2p\" \"$1/parts\" | "
	    "{ read -r k pn first len url; f=$(sed -n \"${k}p\" \"$1/files\"); c=\"$1/c.$2\"; "
	    "(umask 077; printf \"url = \\\"%%s\\\"\\n\" \"$url\" >\"$c\"); a=0; e=; "
	    "while [ $a -lt 3 ]; do e=$(dd if=\"$f\" bs=1048576 iflag=skip_bytes,count_bytes "
	    "skip=\"$first\" count=\"$len\" 2>/dev/null | curl -fsS -K \"$c\" -T - -H "
	    "\"Content-Length: $len\" -H \"Transfer-Encoding:\" -H \"Expect:\" -D - -o /dev/null "
	    "2>/dev/null | tr -d "
	    "\"\\r\\\"\" | sed -n \"s/^[Ee][Tt][Aa][Gg]: *//p\"); [ -n \"$e\" ] && break; "
	    "a=$((a + 1)); sleep $a; done; rm -f \"$c\"; [ -n \"$e\" ] || { echo \"file $k part "
	    "$pn: the PUT failed 3 times\" >&2; exit 1; }; echo \"$k $pn $e\"; }' _ ",
	    par);
	rc |= isc_buf_puts(b, p->dir);
	rc |= isc_buf_printf(b, " {} || exit %d; ", p->fail_code);
	return rc ? ISC_ENOMEM : 0;
}
