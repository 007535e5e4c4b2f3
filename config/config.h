/*
 * $ISC_HOME/config.toml: provider endpoints and regions, the default image,
 * the tick interval and the broker's other knobs. Read with the project's
 * TOML parser; unknown keys are errors that name the file, line and key.
 * See docs/config.md for every key and its default.
 */
#ifndef ISC_CONFIG_CONFIG_H
#define ISC_CONFIG_CONFIG_H

#include "common/err.h"

#include <stddef.h>
#include <stdint.h>

/* One key = value of a provider's section, handed to its driver as a string. */
struct isc_config_setting {
	char *key;
	char *value;
};

struct isc_provider_config {
	char *name;     /* "aws", "gcp", "oci" */
	char **regions; /* accounts are watched and reconciled in these */
	size_t n_regions;
	char *ssh_user;                      /* the image's login user (default "root") */
	int ssh_port;                        /* default 22 */
	struct isc_config_setting *settings; /* every other key of [providers.NAME] */
	size_t n_settings;
};

struct isc_config {
	char *path;               /* where it was read from ("" when defaults only) */
	char *broker_id;          /* tags every instance; written by isc init */
	long tick_interval_ms;    /* 2000 */
	char *default_image;      /* "pytorch/pytorch:latest" */
	long retry_wait_ms;       /* a waiting experiment is placed again after this; 30000 */
	int stop_grace_s;         /* docker stop grace period; 30 */
	long boot_deadline_ms;    /* per node SSH connect deadline; 300000 */
	long replace_deadline_ms; /* lost nodes of a gang replaced within this; 180000 */
	/* Stragglers (issue 46): a gang whose other nodes run waits this long after its launch
	 * for a node still booting, by the shape's family, then replaces that node alone. */
	long boot_deadline_vm_ms;    /* 60000 */
	long boot_deadline_gpu_ms;   /* 240000 */
	long boot_deadline_metal_ms; /* 1200000 */
	long command_timeout_ms;     /* per remote command; 600000 */
	/* The image's pull, judged by progress (issue 46): no output for this long stops it */
	long image_pull_stall_ms;      /* 120000 */
	long image_pull_max_ms;        /* ... and this caps it in all; 3600000 */
	int master_port;               /* 29500 */
	char *shm_size;                /* "": half the node's RAM */
	char *efa_plugin_version;      /* the image's aws-ofi-nccl; "": 1.7 or later */
	int64_t reservation_window_ms; /* credits reserved ahead; 3600000 */
	long charge_interval_ms;       /* a running node is charged at most this often; 60000 */
	/* a hold is re-authorised when what it holds falls below this part of one window,
	 * in millionths (hold_renew_below = 0.5: 500000) */
	int64_t hold_renew_below_ppm;
	int reconcile_every_ticks; /* 30 */
	/*
	 * "" (the Output Path), an absolute folder, or "s3://BUCKET[/PREFIX]" (issue 45: the
	 * nodes send checkpoints straight to the bucket; docs/artifacts.md). Anything else is
	 * refused at load, naming the key.
	 */
	char *artifact_root;
	char *artifact_s3_bucket; /* NULL unless artifact_root is s3:// */
	char *artifact_s3_prefix; /* "" or "a/b" (no leading or trailing '/') */
	/* The bucket's S3 API, named as [providers.aws] names its own (docs/config.md). */
	char *artifact_endpoint_s3;      /* "": AWS_ENDPOINT_URL_S3, ..., s3.REGION.amazonaws.com */
	char *artifact_s3_region;        /* "": AWS_REGION, else us-east-1 */
	char *artifact_s3_addressing;    /* "auto", "path", "virtual" */
	char *artifact_profile;          /* a profile of the shared credentials file; "": none */
	char *artifact_credentials_file; /* "": AWS_SHARED_CREDENTIALS_FILE, ~/.aws/credentials */
	int artifact_allow_insecure_endpoint; /* plain http:// to a host that is not loopback */
	long artifact_url_ttl_s; /* a presigned URL given to a node lives this long; 900 */
	long lease_ms;           /* a burst's lease on a replica (docs/ha.md); 8000, 3000..60000 */
	long broker_workers;     /* bursts stepped at once, each on a store connection; 32 */
	char *store_url; /* "sqlite:" ($ISC_HOME/isc.db) or postgresql://...; ISC_STORE_URL wins */
	long checkpoint_sync_ms;      /* 600000 */
	long lossy_sync_ms;           /* 30000 */
	long node_absence_confirm_ms; /* a node missing from describes this long is gone; 30000 */
	long describe_wait_ms; /* --once and a takeover wait this long for fresh describes; 60000 */
	long price_refresh_ms; /* live spot prices of candidates this often; 0: never; 3600000 */
	/* the list-price sources (prices/lists.h), each on its own schedule; 0: never */
	long price_refresh_gcp_ms;          /* Cloud Billing Catalog; 21600000 */
	long price_refresh_oci_ms;          /* OCI price list; 21600000 */
	long price_refresh_aws_ondemand_ms; /* AWS Price List GetProducts; 21600000 */
	/* Caps on what nodes send and a reserve for the store (docs/security.md). */
	int64_t rank_log_max_bytes; /* each rank_N.txt; 268435456 (256 MiB) */
	/* the rank logs the store keeps of one experiment, all ranks (issue 45); 1 GiB */
	int64_t experiment_log_max_bytes;
	int64_t artifact_max_bytes;   /* one artifact pull; 274877906944 (256 GiB) */
	int64_t artifact_max_entries; /* one artifact pull; 200000 */
	int64_t disk_reserve_bytes;   /* kept free on $ISC_HOME's disk; 1073741824 (1 GiB) */
	/* Every node transfer: artifact pulls, restores, dataset copies (issue 42). */
	int64_t transfer_deadline_ms;     /* the whole transfer; 7200000 (2 h) */
	int64_t transfer_min_bytes_per_s; /* the floor, judged per window; 65536 */
	int64_t transfer_window_ms;       /* the floor's window; 60000 */
	/* Artifacts brought home per organisation, all its experiments together; 1 TiB. */
	int64_t org_artifact_quota_bytes;
	/* The on-prem queue (docs/queue.md). */
	long cycle_ms;           /* one cycle run; 90000 */
	long period_ms;          /* interruptible apportioning period; 7200000 */
	long node_down_after_ms; /* a pool node holding a run, silent this long, is lost; 30000 */
	long node_probe_ms;      /* every pool node is probed (one SSH login) this often; 10000 */
	int burst_validation;    /* a burst first runs one cycle on-prem; 0 (off) */
	/* The API (docs/api.md). */
	char *api_socket;         /* "" = $ISC_HOME/run/api.sock */
	char *api_listen;         /* "HOST:PORT" for TCP with bearer tokens; "" = none */
	char *metrics_listen;     /* "HOST:PORT" for GET /metrics without a token; "" = none */
	long api_max_connections; /* per listener; 512 */
	long api_max_connections_per_ip; /* TCP connections from one address; 32 */
	long api_timeout_s;              /* a slow or idle client is dropped after this; 30 */
	long api_header_timeout_s; /* a request's headers from a known caller within this; 10 */
	long api_threads;          /* one per online CPU, at least 2 */
	long api_slow_threads;     /* threads for slow calls (api/slow.h); 4 */
	long api_slow_queue;       /* slow calls that may wait for a thread; 64 */
	struct isc_provider_config *providers;
	size_t n_providers;
};

/* Reads $home/config.toml; a missing file gives the defaults (and no providers). */
int isc_config_load(const char *home, struct isc_config **out, struct isc_err *err);
void isc_config_free(struct isc_config *c);
/*
 * Where an experiment's artifact folders are kept between runs and clusters
 * (artifact_root/<id>, else the Output Path $home/experiments/<id>); bursts and on-prem runs
 * share it, so a validation cycle's checkpoint reaches the cloud. Caller frees.
 */
char *isc_config_artifact_dir(const struct isc_config *c, const char *home,
                              const char *experiment_id);
/*
 * artifact_root as the config gives it: "" or an absolute folder (0), or
 * s3://BUCKET[/PREFIX] with a valid bucket name and a prefix without "..", "."
 * or empty segments (0, bucket and prefix set when both are non-NULL; caller
 * frees). Anything else: ISC_EINVALID naming artifact_root and what is wrong.
 */
int isc_config_artifact_root_parse(const char *root, char **bucket, char **prefix,
                                   struct isc_err *err);
/* Borrowed; NULL when the provider has no section. */
const struct isc_provider_config *isc_config_provider(const struct isc_config *c, const char *name);
/* A setting of a provider section, or NULL. */
const char *isc_config_setting(const struct isc_provider_config *p, const char *key);
/*
 * The overspend bound (docs/credits.md) needs each renewal to cover at least
 * one tick: refuses a tick longer than the reservation window, naming where
 * each value came from. Called after load and after a --interval-ms override.
 */
/* The hold's renewal threshold in ms of the window: reservation_window_ms x hold_renew_below. */
int64_t isc_config_hold_renew_below_ms(const struct isc_config *c);
int isc_config_check_tick(const struct isc_config *c, long tick_interval_ms, struct isc_err *err);
/* Writes a commented default config.toml (mode 0600) unless one exists. */
int isc_config_write_default(const char *home, struct isc_err *err);
/* api_threads' default: one server thread per online CPU, at least 2 (at most 256). */
long isc_config_default_api_threads(void);

#endif
