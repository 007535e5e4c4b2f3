/*
 * The broker's bridge to the launcher: builds the boot spec from the
 * experiment and its cluster's nodes, pins host keys in the store, and keeps
 * the experiment's artifacts under the artifact root between clusters.
 */
#include "broker/broker_int.h"
#include "broker/liveness.h"
#include "broker/logship.h"

#include "artifacts/unpack.h"
#include "common/log.h"
#include "datasets/datasets.h"
#include "keys/vault.h"
#include "launcher/keys.h"
#include "launcher/launcher.h"
#include "store/store_hostkeys.h"
#include "store/store_shapes.h"

#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* Everything the launcher needs, owned here. */
struct boot_ctx {
	json_t *spec_json;
	struct isc_boot_spec spec;
	const char **datasets;
	struct isc_node_target *targets;
	size_t n;
	struct isc_launcher_opts opts;
	char *key_pem; /* the cluster's private key, opened from the store (issue 45) */
	size_t key_pem_len;
	char *image;
};

static void boot_ctx_cleanup(struct boot_ctx *x)
{
	json_decref(x->spec_json);
	free(x->datasets);
	free(x->targets);
	if (x->key_pem)
		isc_vault_wipe_free(x->key_pem, x->key_pem_len + 1);
	free(x->image);
}

/*
 * The cluster's key, opened from the store: on s, or (the callers without a
 * connection of their own) on a short one.
 */
static int load_key(struct isc_broker *b, struct isc_store *s, const char *cluster_id,
                    struct boot_ctx *x, struct isc_err *err)
{
	struct isc_store *own = NULL;
	int rc = 0;

	if (!s && (rc = isc_store_open(b->home, 0, &own, err)))
		return rc;
	rc = isc_cluster_key_load_sealed(s ? s : own, b->home, cluster_id, &x->key_pem,
	                                 &x->key_pem_len, err);
	isc_store_free(own);
	return rc;
}

static int boot_ctx_init(struct isc_broker *b, struct isc_store *s, const char *experiment_id,
                         const char *name, const char *spec_json, const struct isc_cluster *c,
                         const struct isc_node *nodes, size_t n, struct boot_ctx *x,
                         struct isc_err *err)
{
	const struct isc_provider_config *pc = isc_config_provider(b->config, c->provider);
	json_t *list, *image;
	int rc;

	memset(x, 0, sizeof(*x));
	if ((rc = load_key(b, s, c->id, x, err)))
		return rc;
	x->spec_json = json_loads(spec_json, 0, NULL);
	if (!x->spec_json)
		return isc_err_set(err, ISC_EINVALID, "experiment %s has an unreadable spec",
		                   experiment_id);
	list = json_object_get(x->spec_json, "dataset_id_list");
	x->datasets = calloc(json_array_size(list) + 1, sizeof(*x->datasets));
	x->targets = calloc(n ? n : 1, sizeof(*x->targets));
	image = json_object_get(x->spec_json, "image");
	x->image =
	    strdup(json_is_string(image) ? json_string_value(image) : b->config->default_image);
	if (!x->datasets || !x->targets || !x->image)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; i < json_array_size(list); i++)
		x->datasets[i] = json_string_value(json_array_get(list, i));
	x->spec.experiment_id = experiment_id;
	x->spec.experiment_name = name;
	x->spec.compute_mode = "burst";
	x->spec.cycle_count = c->cycle;
	x->spec.cycle_time_ms = 0;
	x->spec.command = json_string_value(json_object_get(x->spec_json, "command"));
	x->spec.image = x->image;
	x->spec.dataset_ids = x->datasets;
	x->spec.n_datasets = json_array_size(list);
	x->spec.nnodes = c->nnodes;
	x->spec.nproc = c->nproc;
	x->spec.master_port = b->config->master_port;
	x->spec.shm_size = b->config->shm_size;
	x->spec.efa_plugin_version = b->config->efa_plugin_version;
	if (!x->spec.command)
		return isc_err_set(err, ISC_EINVALID, "experiment %s has no command",
		                   experiment_id);
	for (size_t i = 0; i < n; i++) {
		x->targets[i].rank = nodes[i].rank;
		x->targets[i].host =
		    nodes[i].public_ip[0] ? nodes[i].public_ip : nodes[i].private_ip;
		x->targets[i].port = pc ? pc->ssh_port : 22;
		x->targets[i].private_ip = nodes[i].private_ip;
		x->targets[i].pin_target = nodes[i].instance_id;
	}
	x->n = n;
	x->opts.user = pc ? pc->ssh_user : "root";
	x->opts.key_pem = x->key_pem;
	x->opts.key_pem_len = x->key_pem_len;
	x->opts.connect_deadline_ms = b->config->boot_deadline_ms;
	x->opts.command_timeout_ms = b->config->command_timeout_ms;
	x->opts.image_pull_stall_ms = b->config->image_pull_stall_ms;
	x->opts.image_pull_max_ms = b->config->image_pull_max_ms;
	/* Node threads check host keys on a store connection of their own. */
	x->opts.check = isc_store_hostkey_check_home;
	x->opts.check_ctx = b->home;
	x->opts.artifact_max_bytes = (uint64_t)b->config->artifact_max_bytes;
	x->opts.artifact_max_entries = (uint64_t)b->config->artifact_max_entries;
	x->opts.log_max_bytes = (uint64_t)b->config->rank_log_max_bytes;
	x->opts.min_free_bytes = (uint64_t)b->config->disk_reserve_bytes;
	x->opts.transfer.deadline_ms = b->config->transfer_deadline_ms;
	x->opts.transfer.min_bytes_per_s = (uint64_t)b->config->transfer_min_bytes_per_s;
	x->opts.transfer.window_ms = b->config->transfer_window_ms;
	return 0;
}

int broker_datasets_check(struct isc_store *s, const struct isc_experiment *e, struct isc_err *err)
{
	json_t *spec = json_loads(e->spec_json, 0, NULL);
	json_t *list = json_object_get(spec, "dataset_id_list");
	size_t n = json_array_size(list);
	const char **ids = calloc(n + 1, sizeof(*ids));
	struct isc_dataset *ds = NULL;
	int rc = 0;
	if (!ids)
		rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; !rc && i < n; i++)
		ids[i] = json_string_value(json_array_get(list, i));
	if (!rc && n && !(rc = isc_dataset_resolve_all(s, e->org_name, ids, n, &ds, err)))
		isc_dataset_list_free(ds, n);
	free(ids);
	json_decref(spec);
	return rc;
}

/* The datasets of a burst, fetched by the nodes themselves (docs/datasets.md). */
struct fetch_ctx {
	struct isc_dataset *ds;
	struct isc_dataset_fetch_file **plans;
	size_t *n_plan;
	struct isc_boot_dataset_file **files;
	struct isc_boot_dataset *boot;
	const char **names;
	size_t n;
};

static void fetch_ctx_cleanup(struct fetch_ctx *f)
{
	for (size_t i = 0; i < f->n; i++) {
		if (f->plans)
			isc_dataset_fetch_plan_free(f->plans[i], f->n_plan[i]);
		if (f->files)
			free(f->files[i]);
	}
	isc_dataset_list_free(f->ds, f->n);
	free(f->plans);
	free(f->n_plan);
	free(f->files);
	free(f->boot);
	free(f->names);
}

/*
 * Resolves the experiment's datasets in its organisation (each must still be
 * Available) and presigns every object for the nodes: no credential reaches a
 * node, only URLs for exactly the bytes iscd verified.
 */
static int fetch_ctx_init(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                          const struct boot_ctx *x, struct fetch_ctx *f, struct isc_err *err)
{
	int rc;
	memset(f, 0, sizeof(*f));
	f->n = x->spec.n_datasets;
	if (!f->n)
		return 0;
	rc = isc_dataset_resolve_all(s, e->org_name, x->spec.dataset_ids, f->n, &f->ds, err);
	if (rc) {
		f->n = 0;
		return rc;
	}
	f->plans = calloc(f->n, sizeof(*f->plans));
	f->n_plan = calloc(f->n, sizeof(*f->n_plan));
	f->files = calloc(f->n, sizeof(*f->files));
	f->boot = calloc(f->n, sizeof(*f->boot));
	f->names = calloc(f->n, sizeof(*f->names));
	if (!f->plans || !f->n_plan || !f->files || !f->boot || !f->names)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	for (size_t i = 0; i < f->n; i++) {
		rc = isc_dataset_fetch_plan(s, b->home, b->config, &f->ds[i],
		                            ISC_DATASET_URL_EXPIRES_S, &f->plans[i], &f->n_plan[i],
		                            err);
		if (rc)
			return isc_err_wrap(err, "dataset %s", f->ds[i].name);
		f->files[i] = calloc(f->n_plan[i], sizeof(*f->files[i]));
		if (!f->files[i])
			return isc_err_set(err, ISC_ENOMEM, "out of memory");
		for (size_t k = 0; k < f->n_plan[i]; k++) {
			const struct isc_dataset_fetch_file *p = &f->plans[i][k];
			const char *ext = p->archive ? isc_dataset_archive_ext(f->ds[i].key) : NULL;
			f->files[i][k] = (struct isc_boot_dataset_file){
			    p->url, p->etag, p->sha256, p->path,
			    !p->archive ? 0 : (ext && strcmp(ext, ".zip") == 0 ? 2 : 1)};
		}
		f->boot[i] =
		    (struct isc_boot_dataset){f->ds[i].copy_name, f->files[i], f->n_plan[i]};
		f->names[i] =
		    f->ds[i].name; /* mounted at /data/<name> whichever way it was named */
	}
	return 0;
}

/*
 * What a shape promises between the nodes of a gang: EFA on the EC2 types
 * DescribeInstanceTypes lists with EFA (EC2 User Guide, "Supported instance types",
 * https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html; the AWS
 * driver gives a gang of them EFA interfaces unless [providers.aws] efa = "never"), RDMA
 * on OCI's bare-metal GPU shapes that join compute clusters (OCI, "Compute Clusters",
 * https://docs.oracle.com/iaas/Content/Compute/Tasks/compute-clusters.htm). A single node
 * has no peer to reach, so only a gang of several nodes is held to it.
 */
static const char *const efa_types[] = {
    "p3dn.24xlarge", "p4d.24xlarge",  "p4de.24xlarge", "p5.48xlarge",
    "p5e.48xlarge",  "p5en.48xlarge", "trn1.32xlarge", "trn1n.32xlarge",
    "trn2.48xlarge", "g4dn.8xlarge",  "g4dn.12xlarge", "g4dn.16xlarge",
    "g4dn.metal",    "g5.8xlarge",    "g5.12xlarge",   "g5.16xlarge",
    "g5.24xlarge",   "g5.48xlarge",   "g6.8xlarge",    "g6.12xlarge",
    "g6.16xlarge",   "g6.24xlarge",   "g6.48xlarge",   NULL};
static const char *const rdma_shapes[] = {
    "BM.GPU4.8",     "BM.GPU.A100-v2.8", "BM.GPU.H100.8",   "BM.GPU.H200.8", "BM.GPU.B200.8",
    "BM.GPU.B300.8", "BM.GPU.GB200.4",   "BM.GPU.MI300X.8", "BM.GPU.L40S.4", NULL};

static int listed(const char *const *list, const char *name)
{
	for (size_t i = 0; list[i]; i++)
		if (strcmp(list[i], name) == 0)
			return 1;
	return 0;
}

static const char *provider_setting(const struct isc_provider_config *pc, const char *key)
{
	for (size_t i = 0; pc && i < pc->n_settings; i++)
		if (strcmp(pc->settings[i].key, key) == 0)
			return pc->settings[i].value;
	return NULL;
}

static int shape_fabric(const struct isc_provider_config *pc, const char *provider,
                        const char *instance_type)
{
	const char *efa = provider_setting(pc, "efa");
	if (strcmp(provider, "aws") == 0 && listed(efa_types, instance_type) &&
	    !(efa && strcmp(efa, "never") == 0))
		return ISC_FABRIC_EFA;
	if (strcmp(provider, "oci") == 0 && listed(rdma_shapes, instance_type))
		return ISC_FABRIC_RDMA;
	return ISC_FABRIC_NONE;
}

/* One timeline event per node with what its fabric check found (isc status shows them). */
static void fabric_events(struct isc_store *s, const struct isc_experiment *e,
                          const struct boot_ctx *x, const struct isc_boot_result *res)
{
	for (size_t i = 0; i < x->n; i++) {
		struct isc_err ignored;
		char msg[600];
		if (!res[i].fabric[0])
			continue;
		snprintf(msg, sizeof(msg), "rank %d (%s): %s", res[i].rank,
		         x->targets[i].pin_target ? x->targets[i].pin_target : x->targets[i].host,
		         res[i].fabric);
		isc_store_event_add(s, e->id, "fabric", msg, &ignored);
	}
}

/*
 * The image's pull stage (issue 46), once a boot: the slowest node's pull, when it
 * took a second or more (an image the nodes had already is not worth a line).
 */
static void pull_event(struct isc_store *s, const struct isc_experiment *e,
                       const struct boot_ctx *x, const struct isc_boot_result *res)
{
	struct isc_err ignored;
	char msg[600];
	size_t slow = 0, pulled = 0;
	for (size_t i = 0; i < x->n; i++) {
		if (res[i].pull_ms < 0)
			continue;
		if (pulled++ == 0 || res[i].pull_ms > res[slow].pull_ms)
			slow = i;
	}
	if (!pulled || res[slow].pull_ms < 1000)
		return;
	snprintf(msg, sizeof(msg), "rank %d (%s) pulled %s in %.1f s, the slowest of %zu node(s)",
	         res[slow].rank,
	         x->targets[slow].pin_target ? x->targets[slow].pin_target : x->targets[slow].host,
	         x->spec.image, (double)res[slow].pull_ms / 1000.0, pulled);
	isc_store_event_add(s, e->id, "pull", msg, &ignored);
}

/* The slowest node's figures of a boot, for `iscd --verbose` (where a boot's time goes). */
static void boot_timings_log(const struct isc_experiment *e, const struct boot_ctx *x,
                             const struct isc_boot_result *res)
{
	size_t slow = 0, booted = 0;
	for (size_t i = 0; i < x->n; i++) {
		if (x->opts.only && !x->opts.only[i])
			continue;
		if (booted++ == 0 || res[i].total_ms > res[slow].total_ms)
			slow = i;
	}
	if (booted)
		isc_log(ISC_LOG_DEBUG,
		        "%s: boot of %zu of %zu node(s): slowest rank %d: handshake %ld ms, logged "
		        "in %ld ms, image pulled in %ld ms, done %ld ms",
		        e->id, booted, x->n, res[slow].rank, res[slow].handshake_ms,
		        res[slow].connect_ms, res[slow].pull_ms, res[slow].total_ms);
}

/*
 * A watcher of the cluster's nodes while a step talks to them (broker/liveness.h):
 * *gone becomes 1 once the watch has seen one of them go, and the launcher then
 * stops waiting for the nodes. NULL (nothing watched) if it cannot start.
 */
static struct broker_node_watch *watch_nodes(struct isc_broker *b, const struct isc_experiment *e,
                                             const struct isc_cluster *c,
                                             const struct isc_node *nodes, size_t n,
                                             volatile int *gone)
{
	const char **ids = calloc(n ? n : 1, sizeof(*ids));
	struct broker_node_watch *w = NULL;
	struct isc_err err;

	if (!ids)
		return NULL;
	for (size_t i = 0; i < n; i++)
		ids[i] = nodes[i].instance_id;
	if (broker_node_watch_start(b->home, c->id, ids, n, gone, &w, &err))
		isc_log(ISC_LOG_WARN, "%s: %s", e->id, err.msg);
	free(ids);
	return w;
}

int broker_boot_cluster(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                        const struct isc_cluster *c, const struct isc_node *nodes, size_t n,
                        const int *only, struct isc_err *err)
{
	struct boot_ctx x;
	struct fetch_ctx f;
	struct broker_node_watch *w = NULL;
	volatile int gone = 0; /* a node went during the boot: it stops waiting for them */
	struct isc_boot_result *res = NULL;
	int rc;

	memset(&f, 0, sizeof(f));
	rc = boot_ctx_init(b, s, e->id, e->name, e->spec_json, c, nodes, n, &x, err);
	if (!rc)
		rc = fetch_ctx_init(b, s, e, &x, &f, err);
	if (!rc && f.n) {
		x.spec.dataset_ids = f.names;
		x.spec.dataset_fetch = f.boot;
	}
	if (!rc) {
		struct isc_shape sh;
		struct isc_err ignored;
		memset(&sh, 0, sizeof(sh));
		/* A shape gone from the catalog since the launch promises nothing we can name. */
		if (isc_store_shape_get(s, c->shape_id, &sh, &ignored) == 0 && sh.instance_type)
			x.spec.fabric = shape_fabric(isc_config_provider(b->config, c->provider),
			                             c->provider, sh.instance_type);
		x.spec.fabric_required = x.spec.fabric != ISC_FABRIC_NONE && n > 1;
		isc_shape_cleanup(&sh);
		res = calloc(n ? n : 1, sizeof(*res));
		w = watch_nodes(b, e, c, nodes, n, &gone);
		x.opts.cancel = &gone;
		x.opts.only = only;
		rc = res ? isc_launcher_boot_nodes(&x.spec, x.targets, x.n, &x.opts, res, err)
		         : isc_err_set(err, ISC_ENOMEM, "out of memory");
		broker_node_watch_stop(w);
		if (res) {
			fabric_events(s, e, &x, res);
			pull_event(s, e, &x, res);
			boot_timings_log(e, &x, res);
		}
		free(res);
	}
	fetch_ctx_cleanup(&f);
	boot_ctx_cleanup(&x);
	return rc;
}

void broker_stop_containers(struct isc_broker *b, const struct isc_experiment *e,
                            const struct isc_cluster *c, const struct isc_node *nodes, size_t n)
{
	struct boot_ctx x;
	struct isc_err err;
	struct isc_node *live = calloc(n ? n : 1, sizeof(*live));
	size_t k = 0;

	if (!live)
		return;
	/* Only nodes the cloud still runs can take a stop (or a GCP node in its notice's
	 * soft-off window: its container still gets the grace to write its checkpoint). */
	for (size_t i = 0; i < n; i++)
		if (broker_node_reachable_in_notice(&nodes[i], c->provider, isc_store_now_ms()))
			live[k++] = nodes[i];
	if (k) {
		if (boot_ctx_init(b, NULL, e->id, e->name, e->spec_json, c, live, k, &x, &err) ==
		    0) {
			x.opts.connect_deadline_ms = 10000;
			isc_launcher_stop(&x.spec, x.targets, x.n, &x.opts,
			                  b->config->stop_grace_s);
		}
		boot_ctx_cleanup(&x);
	}
	free(live);
}

/*
 * The store's log sink, the shipper made at the first follow (NULL when it cannot be:
 * the follows then write rank_N.txt only, and a warning says why).
 */
static const struct isc_log_sink *broker_log_sink(struct isc_broker *b)
{
	const struct isc_log_sink *sink = NULL;
	struct isc_err err;

	pthread_mutex_lock(&b->lock);
	if (!b->logship && isc_logship_new(b->home, (uint64_t)b->config->experiment_log_max_bytes,
	                                   0, &b->logship, &err))
		isc_log(ISC_LOG_WARN, "rank logs go to rank_N.txt only: %s", err.msg);
	if (b->logship)
		sink = isc_logship_sink(b->logship);
	pthread_mutex_unlock(&b->lock);
	return sink;
}

int broker_follow_start(struct isc_broker *b, struct isc_store *s, const struct isc_cluster *c,
                        struct isc_err *err)
{
	struct isc_experiment e;
	struct isc_node *nodes = NULL;
	struct broker_follower *f = NULL;
	struct boot_ctx x;
	char *out_dir = NULL;
	size_t n = 0;
	int rc;

	if ((rc = isc_store_experiment_get(s, c->experiment_id, &e, err)))
		return rc;
	memset(&x, 0, sizeof(x));
	rc = isc_store_node_list(s, c->id, &nodes, &n, err);
	if (!rc)
		rc = boot_ctx_init(b, s, e.id, e.name, e.spec_json, c, nodes, n, &x, err);
	if (!rc) {
		char *parent = NULL;
		if (asprintf(&parent, "%s/experiments", b->home) >= 0) {
			mkdir(parent, 0700);
			free(parent);
		}
		/* The Output Path recorded at submission: with artifact_root, a folder every
		 * replica shares, so a replica that takes the burst over writes where the
		 * others read. */
		out_dir = e.output_path && e.output_path[0] ? strdup(e.output_path)
		                                            : broker_output_dir(b, e.id);
		f = calloc(1, sizeof(*f));
		if (!out_dir || !f || !(f->cluster_id = strdup(c->id)))
			rc = isc_err_set(err, ISC_ENOMEM, "out of memory");
		x.opts.connect_deadline_ms = 10000;
		x.opts.log_sink = broker_log_sink(b);
		if (!rc)
			rc = isc_launch_follow_start(&x.spec, x.targets, x.n, &x.opts, out_dir,
			                             &f->follow, err);
	}
	boot_ctx_cleanup(&x);
	if (!rc) {
		pthread_mutex_lock(&b->lock);
		f->next = b->followers;
		b->followers = f;
		pthread_mutex_unlock(&b->lock);
		f = NULL;
	}
	if (f) {
		free(f->cluster_id);
		free(f);
	}
	free(out_dir);
	isc_node_list_free(nodes, n);
	isc_experiment_cleanup(&e);
	return rc;
}

/*
 * Where rank 0's checkpoint, crud and lossy folders come home: by default the
 * experiment's Output Path, next to the rank logs, where `isc experiments`
 * points the user; <artifact_root>/<experiment> when artifact_root is set.
 */
static char *artifact_dir(const struct isc_broker *b, const char *experiment_id)
{
	return isc_config_artifact_dir(b->config, b->home, experiment_id);
}

/*
 * The last refusal recorded per experiment and set of folders: a node that keeps
 * its links gets one event, not one per sync. Guarded by refusals_lock; entries
 * live as long as iscd (one small string per experiment that had a refusal).
 */
struct refusal {
	char *experiment_id;
	int which;
	char *msg;
	struct refusal *next;
};
static struct refusal *refusals;
static pthread_mutex_t refusals_lock = PTHREAD_MUTEX_INITIALIZER;

static int refusal_is_new(const char *experiment_id, int which, const char *msg)
{
	struct refusal *r;
	int is_new = 1;

	pthread_mutex_lock(&refusals_lock);
	for (r = refusals; r; r = r->next)
		if (r->which == which && strcmp(r->experiment_id, experiment_id) == 0)
			break;
	if (r && strcmp(r->msg, msg) == 0) {
		is_new = 0;
	} else if (r) {
		char *copy = strdup(msg);
		if (copy) {
			free(r->msg);
			r->msg = copy;
		}
	} else if ((r = calloc(1, sizeof(*r))) != NULL) {
		r->experiment_id = strdup(experiment_id);
		r->msg = strdup(msg);
		r->which = which;
		if (r->experiment_id && r->msg) {
			r->next = refusals;
			refusals = r;
		} else {
			free(r->experiment_id);
			free(r->msg);
			free(r);
		}
	}
	pthread_mutex_unlock(&refusals_lock);
	return is_new;
}

/* A pull of rank 0's folders; stop (may be NULL) cuts it short (broker_artifacts_sync). */
static int pull(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                const struct isc_cluster *c, const struct isc_node *rank0, int which,
                volatile int *stop, struct isc_err *err)
{
	struct isc_unpack_report report;
	struct broker_quota_hold hold;
	struct boot_ctx x;
	char *dir;
	int rc;

	/* Running, or stopping within its notice (GCP's soft-off window: sshd still up). */
	if (!broker_node_reachable_in_notice(rank0, c->provider, isc_store_now_ms()))
		return isc_err_set(err, ISC_ENOTFOUND, "rank 0 (%s) is %s", rank0->instance_id,
		                   rank0->state);
	if (broker_s3_enabled(b)) {
		/* Straight from rank 0 to the bucket: nothing lands on this host. */
		rc = boot_ctx_init(b, s, e->id, e->name, e->spec_json, c, rank0, 1, &x, err);
		if (!rc) {
			x.opts.cancel = stop;
			rc = broker_s3_sync(b, s, e, &x.targets[0], &x.opts, which, err);
		}
		boot_ctx_cleanup(&x);
		return rc;
	}
	dir = artifact_dir(b, e->id);
	if (!dir)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	{
		char *parent = strdup(dir);
		if (parent) {
			*strrchr(parent, '/') = '\0';
			mkdir(parent, 0700);
			free(parent);
		}
	}
	rc = boot_ctx_init(b, s, e->id, e->name, e->spec_json, c, rank0, 1, &x, err);
	/* The organisation's quota lowers the pull's cap, or refuses it (issue 42). */
	if (!rc &&
	    (rc = broker_quota_take(b, s, e, which, &x.opts.artifact_max_bytes, &hold, err)) != 0)
		isc_err_wrap(err, "artifacts from rank 0");
	if (!rc) {
		x.opts.cancel = stop;
		rc = isc_launcher_pull_artifacts(&x.targets[0], &x.opts, dir, which, &report, err);
		if (rc && hold.capped && strstr(err->msg, "bytes of files (the cap)"))
			isc_err_wrap(err,
			             "org_artifact_quota_bytes (%lld MiB) leaves the organisation "
			             "only %lld MiB for this pull; the previous copy stays",
			             (long long)(b->config->org_artifact_quota_bytes >> 20),
			             (long long)(hold.reserved >> 20));
		broker_quota_give(b, e, &hold, rc == 0);
	}
	boot_ctx_cleanup(&x);
	if (!rc && (report.refused || report.stripped)) {
		char msg[ISC_ERR_MSG_MAX];
		struct isc_err ignored;
		/* A node's artifact folders held what the broker never takes home: say so once
		 * per sync. */
		snprintf(msg, sizeof(msg),
		         "artifacts from rank 0: %llu member(s) refused (first: %s), set-id bits "
		         "removed from %llu",
		         (unsigned long long)report.refused,
		         report.first_refused[0] ? report.first_refused : "none",
		         (unsigned long long)report.stripped);
		if (refusal_is_new(e->id, which, msg)) {
			isc_log(ISC_LOG_WARN, "%s: %s", e->id, msg);
			isc_store_event_add(s, e->id, "artifacts", msg, &ignored);
		}
	}
	free(dir);
	return rc;
}

int broker_artifacts_pull(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                          const struct isc_cluster *c, const struct isc_node *rank0, int which,
                          struct isc_err *err)
{
	return pull(b, s, e, c, rank0, which, NULL, err);
}

int broker_artifacts_sync(struct isc_broker *b, struct isc_store *s, const struct isc_experiment *e,
                          const struct isc_cluster *c, const struct isc_node *rank0, int which,
                          struct isc_err *err)
{
	volatile int *stop = broker_step_stop();
	int rc = pull(b, s, e, c, rank0, which, stop, err);

	if (rc && stop && *stop) {
		const char *why = *stop == BROKER_STOP_CANCELLED ? "the experiment was cancelled"
		                  : *stop == BROKER_STOP_YIELD
		                      ? "its worker went to another organisation's burst (a fair "
		                        "share of broker_workers each)"
		                      : "iscd is stopping";
		rc =
		    isc_err_set(err, ISC_ETRANSIENT, "cut short: %s; the previous copy stays", why);
	}
	return rc;
}

int broker_artifacts_push(struct isc_broker *b, const struct isc_experiment *e,
                          const struct isc_cluster *c, const struct isc_node *nodes, size_t n,
                          volatile int *cancel, struct isc_err *err)
{
	struct boot_ctx x;
	struct stat st;
	char *dir;
	int rc;

	if (broker_s3_enabled(b)) {
		/* Every node fetches the current version straight from the bucket. */
		rc = boot_ctx_init(b, NULL, e->id, e->name, e->spec_json, c, nodes, n, &x, err);
		x.opts.cancel = cancel;
		if (!rc)
			rc = broker_s3_restore(b, e, x.targets, x.n, &x.opts, err);
		boot_ctx_cleanup(&x);
		return rc;
	}
	dir = artifact_dir(b, e->id);
	if (!dir)
		return isc_err_set(err, ISC_ENOMEM, "out of memory");
	if (stat(dir, &st) != 0) {
		free(dir);
		return 0; /* nothing was brought home yet */
	}
	rc = boot_ctx_init(b, NULL, e->id, e->name, e->spec_json, c, nodes, n, &x, err);
	x.opts.cancel = cancel;
	if (!rc)
		rc = isc_launcher_push_artifacts_all(x.targets, x.n, &x.opts, dir, NULL, err);
	boot_ctx_cleanup(&x);
	free(dir);
	return rc;
}

int broker_disk_low(struct isc_broker *b, char *why, size_t cap)
{
	int64_t avail = isc_unpack_free_bytes(b->home);
	int64_t reserve = b->config->disk_reserve_bytes;

	if (reserve <= 0 || avail < 0 || avail >= reserve)
		return 0;
	snprintf(why, cap,
	         "the disk of %s is nearly full (%lld MiB free, disk_reserve_bytes keeps %lld "
	         "MiB for the ledger); no new cluster starts until space is freed",
	         b->home, (long long)(avail >> 20), (long long)(reserve >> 20));
	return 1;
}
