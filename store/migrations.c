/*
 * The schema, as an ordered list of migrations. Migration N takes a store at
 * schema version N-1 to N; store.c runs the ones a store has not seen, each in
 * its own transaction, so an older database is upgraded in place with its data.
 * Never edit a migration that has shipped: add a new one.
 */
#include "store/store_int.h"

#include <stddef.h>

static const char *const migrations[] = {
    /* 1: foundation: organisations, projects, experiments and their events. */
    "CREATE TABLE orgs ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  created_at_ms INTEGER NOT NULL);"
    "CREATE TABLE projects ("
    "  id TEXT PRIMARY KEY,"
    "  org_id INTEGER NOT NULL REFERENCES orgs(id),"
    "  name TEXT NOT NULL,"
    "  created_at_ms INTEGER NOT NULL,"
    "  UNIQUE (org_id, name));"
    "CREATE TABLE experiments ("
    "  id TEXT PRIMARY KEY,"
    "  project_id TEXT NOT NULL REFERENCES projects(id),"
    "  org_id INTEGER NOT NULL REFERENCES orgs(id),"
    "  name TEXT NOT NULL,"
    "  compute_mode TEXT NOT NULL,"
    "  gpus INTEGER NOT NULL,"
    "  spec_json TEXT NOT NULL,"
    "  status TEXT NOT NULL,"
    "  created_at_ms INTEGER NOT NULL,"
    "  updated_at_ms INTEGER NOT NULL);"
    "CREATE INDEX experiments_status ON experiments(status);"
    "CREATE TABLE events ("
    "  id INTEGER PRIMARY KEY,"
    "  experiment_id TEXT REFERENCES experiments(id),"
    "  at_ms INTEGER NOT NULL,"
    "  kind TEXT NOT NULL,"
    "  message TEXT NOT NULL);"
    "CREATE INDEX events_experiment ON events(experiment_id, id);",

    /* 2: bursts: shapes, clusters, nodes, launch intents, pinned host keys. */
    "ALTER TABLE experiments ADD COLUMN status_reason TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE experiments ADD COLUMN nnodes INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE experiments ADD COLUMN nproc INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE experiments ADD COLUMN shape_id TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE experiments ADD COLUMN cycle_count INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE experiments ADD COLUMN output_path TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE experiments ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE experiments ADD COLUMN next_attempt_ms INTEGER NOT NULL DEFAULT 0;"
    "CREATE TABLE shapes ("
    "  id TEXT PRIMARY KEY,"      /* lower-case shape id */
    "  display_id TEXT NOT NULL," /* as the provider spells it */
    "  provider TEXT NOT NULL,"
    "  region TEXT NOT NULL,"
    "  instance_type TEXT NOT NULL,"
    "  spot INTEGER NOT NULL,"
    "  gpu_type TEXT NOT NULL,"
    "  gpus_per_node INTEGER NOT NULL,"
    "  gpu_mem_mib INTEGER NOT NULL," /* per node, all GPUs */
    "  vcpus INTEGER NOT NULL,"
    "  mem_mib INTEGER NOT NULL,"
    "  price_micros INTEGER NOT NULL," /* per node-hour */
    "  zones TEXT NOT NULL,"           /* comma-separated, tried in order */
    "  price_date TEXT NOT NULL,"      /* YYYY-MM-DD of the price data */
    "  updated_at_ms INTEGER NOT NULL);"
    "CREATE INDEX shapes_provider ON shapes(provider, region);"
    "CREATE TABLE clusters ("
    "  id TEXT PRIMARY KEY,"
    "  experiment_id TEXT NOT NULL REFERENCES experiments(id),"
    "  shape_id TEXT NOT NULL,"
    "  provider TEXT NOT NULL,"
    "  account TEXT NOT NULL," /* 'default' or a cloud key id */
    "  region TEXT NOT NULL,"
    "  zone TEXT NOT NULL DEFAULT '',"
    "  nnodes INTEGER NOT NULL,"
    "  nproc INTEGER NOT NULL,"
    "  cycle INTEGER NOT NULL,"        /* STRONG_CYCLE_COUNT it runs with */
    "  price_micros INTEGER NOT NULL," /* node price snapshot at launch */
    "  state TEXT NOT NULL,"
    "  created_at_ms INTEGER NOT NULL,"
    "  closed_at_ms INTEGER);"
    "CREATE INDEX clusters_state ON clusters(state);"
    "CREATE TABLE intents ("
    "  token TEXT PRIMARY KEY," /* the idempotency token sent to the cloud */
    "  cluster_id TEXT NOT NULL REFERENCES clusters(id),"
    "  shape_id TEXT NOT NULL,"
    "  zone TEXT NOT NULL,"
    "  count INTEGER NOT NULL,"
    "  state TEXT NOT NULL," /* pending | launched | failed */
    "  error TEXT NOT NULL DEFAULT '',"
    "  created_at_ms INTEGER NOT NULL,"
    "  resolved_at_ms INTEGER);"
    "CREATE TABLE nodes ("
    "  id INTEGER PRIMARY KEY,"
    "  cluster_id TEXT NOT NULL REFERENCES clusters(id),"
    "  rank INTEGER NOT NULL,"
    "  instance_id TEXT NOT NULL UNIQUE,"
    "  state TEXT NOT NULL,"
    "  private_ip TEXT NOT NULL DEFAULT '',"
    "  public_ip TEXT NOT NULL DEFAULT '',"
    "  zone TEXT NOT NULL DEFAULT '',"
    "  price_micros INTEGER NOT NULL," /* snapshot when launched */
    "  launched_at_ms INTEGER,"        /* as the cloud reports it */
    "  terminated_at_ms INTEGER,"      /* when the cloud confirmed it */
    "  charged_until_ms INTEGER,"
    "  notice_at_ms INTEGER);"
    "CREATE INDEX nodes_cluster ON nodes(cluster_id, rank);"
    "CREATE TABLE host_keys ("
    "  target TEXT PRIMARY KEY," /* instance id, or host:port */
    "  key_type TEXT NOT NULL,"
    "  sha256 TEXT NOT NULL,"
    "  first_seen_ms INTEGER NOT NULL);",

    /* 3: money: the append-only ledger, project budgets, BYO cloud keys. */
    "ALTER TABLE projects ADD COLUMN budget_micros INTEGER;"
    "CREATE TABLE ledger ("
    "  id INTEGER PRIMARY KEY,"
    "  at_ms INTEGER NOT NULL,"
    "  org_id INTEGER NOT NULL REFERENCES orgs(id),"
    "  project_id TEXT REFERENCES projects(id),"
    "  experiment_id TEXT,"
    "  cluster_id TEXT,"
    "  node_instance_id TEXT,"
    "  kind TEXT NOT NULL CHECK (kind IN "
    "('grant','reserve','release','charge','refund','adjustment')),"
    "  amount_micros INTEGER NOT NULL,"
    "  price_micros INTEGER," /* node-hour price snapshot, for charges */
    "  provider TEXT,"
    "  shape_id TEXT,"
    "  period_start_ms INTEGER,"
    "  period_end_ms INTEGER,"
    "  note TEXT NOT NULL DEFAULT '');"
    "CREATE INDEX ledger_org ON ledger(org_id, kind);"
    "CREATE INDEX ledger_experiment ON ledger(experiment_id, kind);"
    "CREATE TRIGGER ledger_no_update BEFORE UPDATE ON ledger"
    "  BEGIN SELECT RAISE(ABORT, 'ledger rows are immutable'); END;"
    "CREATE TRIGGER ledger_no_delete BEFORE DELETE ON ledger"
    "  BEGIN SELECT RAISE(ABORT, 'ledger rows are immutable'); END;"
    "CREATE TABLE cloud_keys ("
    "  id TEXT PRIMARY KEY,"
    "  org_id INTEGER NOT NULL REFERENCES orgs(id),"
    "  provider TEXT NOT NULL,"
    "  name TEXT NOT NULL,"
    "  nonce BLOB NOT NULL,"
    "  ciphertext BLOB NOT NULL," /* AES-256-GCM under the master key */
    "  created_at_ms INTEGER NOT NULL,"
    "  UNIQUE (org_id, provider, name));",

    /*
     * 4: ledger billing marker and lookups. 'credits' rows move balances; 'byo'
     * rows record spend billed by the organisation's own cloud account (never
     * in a balance or budget). A node's charged periods are found by index,
     * and a charge for the same node period can never be written twice.
     */
    "ALTER TABLE ledger ADD COLUMN billing TEXT NOT NULL DEFAULT 'credits'"
    "  CHECK (billing IN ('credits','byo'));"
    "CREATE INDEX ledger_node ON ledger(node_instance_id, kind, period_end_ms);"
    "CREATE INDEX ledger_project ON ledger(project_id, kind);"
    "CREATE UNIQUE INDEX ledger_charge_once ON ledger(node_instance_id, period_start_ms)"
    "  WHERE kind = 'charge';",

    /*
     * 5: crash safety. A node missing from a describe is only gone once its
     * absence has lasted (describes are eventually consistent): absent_since_ms
     * is when it was first missed. A launch intent remembers the zone whose call
     * was last started, so a replay after a crash asks there first. An
     * experiment that is stopping records the final status it is heading for,
     * so a crash during its teardown never changes its outcome.
     */
    "ALTER TABLE nodes ADD COLUMN absent_since_ms INTEGER;"
    "ALTER TABLE intents ADD COLUMN attempt_zone TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE experiments ADD COLUMN final_status TEXT NOT NULL DEFAULT '';",

    /*
     * 6: live prices. Where a shape's price comes from ('catalog': the imported
     * file, as of price_date; 'live': a refresh from the cloud's own price API)
     * and when it was last known to be in force (ms; 0 for catalog prices).
     */
    "ALTER TABLE shapes ADD COLUMN price_source TEXT NOT NULL DEFAULT 'catalog';"
    "ALTER TABLE shapes ADD COLUMN price_checked_ms INTEGER NOT NULL DEFAULT 0;",

    /*
     * 7: the on-prem node pool for cycle and interruptible work. A node is
     * known by host and port; 'draining' keeps its run and gets no new one,
     * 'down' stopped answering.
     */
    "CREATE TABLE pool_nodes ("
    "  id INTEGER PRIMARY KEY,"
    "  host TEXT NOT NULL,"
    "  port INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),"
    "  user TEXT NOT NULL,"
    "  gpus INTEGER NOT NULL CHECK (gpus >= 1),"
    "  state TEXT NOT NULL DEFAULT 'up' CHECK (state IN ('up','draining','down')),"
    "  added_ms INTEGER NOT NULL,"
    "  UNIQUE (host, port));",

    /*
     * 8: running totals of the ledger per organisation, project and experiment,
     * kept by a trigger in the same transaction as each append. The ledger only
     * grows (a row per node per tick), so summing it for every hold and renewal
     * made each money transaction slower the longer the platform ran, and the
     * write lock with it; the rows are immutable, so the totals stay exact.
     * balance: grants + refunds + adjustments - charges; reserved: reserves -
     * releases; spent: charges (all of these for billing 'credits'); charged:
     * charges of any billing (an experiment's cost).
     */
    "CREATE TABLE ledger_totals ("
    "  scope TEXT NOT NULL CHECK (scope IN ('org','project','experiment')),"
    "  key TEXT NOT NULL,"
    "  balance_micros INTEGER NOT NULL DEFAULT 0,"
    "  reserved_micros INTEGER NOT NULL DEFAULT 0,"
    "  spent_micros INTEGER NOT NULL DEFAULT 0,"
    "  charged_micros INTEGER NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (scope, key));"
    "INSERT INTO ledger_totals "
    "  SELECT 'org', CAST(org_id AS TEXT), " ISC_STORE_LEDGER_TOTALS_SUMS_V8
    " FROM ledger GROUP BY org_id;"
    "INSERT INTO ledger_totals "
    "  SELECT 'project', project_id, " ISC_STORE_LEDGER_TOTALS_SUMS_V8 " FROM ledger"
    "  WHERE project_id IS NOT NULL GROUP BY project_id;"
    "INSERT INTO ledger_totals "
    "  SELECT 'experiment', experiment_id, " ISC_STORE_LEDGER_TOTALS_SUMS_V8 " FROM ledger"
    "  WHERE experiment_id IS NOT NULL GROUP BY experiment_id;"
    "CREATE TRIGGER ledger_totals_add AFTER INSERT ON ledger BEGIN"
    "  INSERT OR IGNORE INTO ledger_totals (scope, key) VALUES ('org', CAST(NEW.org_id AS TEXT));"
    "  INSERT OR IGNORE INTO ledger_totals (scope, key)"
    "    SELECT 'project', NEW.project_id WHERE NEW.project_id IS NOT NULL;"
    "  INSERT OR IGNORE INTO ledger_totals (scope, key)"
    "    SELECT 'experiment', NEW.experiment_id WHERE NEW.experiment_id IS NOT NULL;"
    "  UPDATE ledger_totals SET"
    "    balance_micros = balance_micros + (CASE WHEN NEW.billing = 'credits' THEN"
    "      (CASE NEW.kind WHEN 'grant' THEN NEW.amount_micros WHEN 'refund' THEN NEW.amount_micros"
    "       WHEN 'adjustment' THEN NEW.amount_micros WHEN 'charge' THEN -NEW.amount_micros"
    "       ELSE 0 END) ELSE 0 END),"
    "    reserved_micros = reserved_micros + (CASE WHEN NEW.billing = 'credits' THEN"
    "      (CASE NEW.kind WHEN 'reserve' THEN NEW.amount_micros"
    "       WHEN 'release' THEN -NEW.amount_micros ELSE 0 END) ELSE 0 END),"
    "    spent_micros = spent_micros + (CASE WHEN NEW.billing = 'credits' AND"
    "      NEW.kind = 'charge' THEN NEW.amount_micros ELSE 0 END),"
    "    charged_micros = charged_micros +"
    "      (CASE WHEN NEW.kind = 'charge' THEN NEW.amount_micros ELSE 0 END)"
    "  WHERE (scope = 'org' AND key = CAST(NEW.org_id AS TEXT))"
    "     OR (scope = 'project' AND key = NEW.project_id)"
    "     OR (scope = 'experiment' AND key = NEW.experiment_id);"
    "END;",
    /*
     * 9: bring-your-own cloud keys. What a key proved when it was verified
     * (account, principal), where it may be used (regions, "" = all), who
     * added it, and its state: 'active' keys take new launches, 'failing'
     * (verification or a launch refused them) and 'removing' (isc keys remove
     * --force drains them) only watch and terminate what runs on them. The
     * fingerprint is a short hash of the sealed plaintext, for people.
     * cloud_key_master holds a value sealed under the master key, so a wrong
     * master key is refused before anything is read or written with it.
     */
    "ALTER TABLE cloud_keys ADD COLUMN account TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE cloud_keys ADD COLUMN principal TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE cloud_keys ADD COLUMN regions TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE cloud_keys ADD COLUMN added_by TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE cloud_keys ADD COLUMN verified_at_ms INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE cloud_keys ADD COLUMN state TEXT NOT NULL DEFAULT 'active'"
    "  CHECK (state IN ('active','failing','removing'));"
    "ALTER TABLE cloud_keys ADD COLUMN state_reason TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE cloud_keys ADD COLUMN fingerprint TEXT NOT NULL DEFAULT '';"
    "CREATE INDEX cloud_keys_org ON cloud_keys(org_id, provider);"
    "CREATE INDEX clusters_account ON clusters(account, state);"
    "CREATE TABLE cloud_key_master ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  nonce BLOB NOT NULL,"
    "  ciphertext BLOB NOT NULL,"
    "  created_at_ms INTEGER NOT NULL);",

    /*
     * 10: what iscd's on-prem queue knows of each cycle and interruptible
     * experiment (and of a burst's validation cycle), for isc status and for
     * iscd restarting: the place among waiting experiments of its mode (0 when
     * not waiting), the expected next start (ms, -1 unknown), the pool node ids
     * of the current run (comma-separated, '' when none: a restart stops what
     * is left there) and the cycles run to their end.
     */
    "CREATE TABLE queue_state ("
    "  experiment_id TEXT PRIMARY KEY REFERENCES experiments(id),"
    "  position INTEGER NOT NULL DEFAULT 0,"
    "  next_start_ms INTEGER NOT NULL DEFAULT -1,"
    "  run_nodes TEXT NOT NULL DEFAULT '',"
    "  cycles_done INTEGER NOT NULL DEFAULT 0,"
    "  updated_ms INTEGER NOT NULL);",

    /*
     * 11: each rank's exit, as the broker saw it first: an experiment's outcome is every
     * rank's outcome (docs/broker.md), and isc status shows each code.
     */
    "CREATE TABLE rank_exits ("
    "  cluster_id TEXT NOT NULL REFERENCES clusters(id),"
    "  rank INTEGER NOT NULL,"
    "  code INTEGER NOT NULL," /* the container's exit code; 128+signal; -1 vanished */
    "  at_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (cluster_id, rank));",
    /* 12: datasets: S3 objects and folders per organisation, cached by iscd (docs/datasets.md). */
    "CREATE TABLE datasets ("
    "  id TEXT PRIMARY KEY,"
    "  org_id INTEGER NOT NULL REFERENCES orgs(id),"
    "  name TEXT NOT NULL,"
    "  uri TEXT NOT NULL,"
    "  bucket TEXT NOT NULL,"
    "  key TEXT NOT NULL,"
    "  is_folder INTEGER NOT NULL,"
    "  etag TEXT NOT NULL,"
    "  version_id TEXT NOT NULL,"
    "  credentials TEXT NOT NULL,"
    "  size_bytes INTEGER NOT NULL,"
    "  volume_bytes INTEGER NOT NULL,"
    "  cached_bytes INTEGER NOT NULL,"
    "  state TEXT NOT NULL CHECK (state IN ('created', 'caching', 'available', 'failed')),"
    "  reason TEXT NOT NULL,"
    "  copy_name TEXT NOT NULL,"
    "  manifest_json TEXT,"
    "  created_at_ms INTEGER NOT NULL,"
    "  updated_at_ms INTEGER NOT NULL,"
    "  UNIQUE (org_id, name));"
    "CREATE INDEX datasets_state ON datasets(state);",
    /* 13: the API's access model (docs/api.md): platform users, their roles per organisation,
     * bearer tokens (a SHA-256 of the secret only), who launched each experiment, and an
     * append-only audit of every change. */
    "CREATE TABLE users ("
    "  id INTEGER PRIMARY KEY,"
    "  name TEXT NOT NULL UNIQUE,"
    "  created_at_ms INTEGER NOT NULL);"
    "CREATE TABLE memberships ("
    "  user_id INTEGER NOT NULL REFERENCES users(id),"
    "  org_id INTEGER NOT NULL REFERENCES orgs(id),"
    "  role TEXT NOT NULL CHECK (role IN ('member', 'admin', 'finance')),"
    "  created_at_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (user_id, org_id));"
    "CREATE INDEX memberships_org ON memberships(org_id);"
    "CREATE TABLE api_tokens ("
    "  id TEXT PRIMARY KEY,"
    "  user_id INTEGER REFERENCES users(id)," /* NULL: the operator */
    "  hash TEXT NOT NULL,"                   /* hex SHA-256 of the secret */
    "  created_at_ms INTEGER NOT NULL,"
    "  expires_at_ms INTEGER NOT NULL DEFAULT 0,"
    "  revoked_at_ms INTEGER NOT NULL DEFAULT 0);"
    "CREATE TABLE audit ("
    "  id INTEGER PRIMARY KEY,"
    "  at_ms INTEGER NOT NULL,"
    "  actor TEXT NOT NULL,"
    "  address TEXT NOT NULL,"
    "  org_id INTEGER,"
    "  action TEXT NOT NULL,"
    "  target TEXT NOT NULL,"
    "  status INTEGER NOT NULL);"
    "CREATE INDEX audit_org ON audit(org_id, id);"
    "CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit BEGIN"
    "  SELECT RAISE(ABORT, 'the audit is append-only'); END;"
    "CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit BEGIN"
    "  SELECT RAISE(ABORT, 'the audit is append-only'); END;"
    "ALTER TABLE experiments ADD COLUMN owner TEXT NOT NULL DEFAULT '';"
    "CREATE INDEX experiments_org ON experiments(org_id, created_at_ms);",
    /* 14: a dataset's own AWS keys, sealed by keys/ like a cloud key's (docs/datasets.md):
     * the nonce and AES-256-GCM ciphertext || tag; credentials then reads "sealed:<fingerprint>".
     */
    "ALTER TABLE datasets ADD COLUMN credentials_nonce BLOB;"
    "ALTER TABLE datasets ADD COLUMN credentials_ciphertext BLOB;",
    /* 15 (issue 29): a dataset's copy belongs to its organisation: copy_name becomes
     * "@ORGID/LEAF" (iscd moves the folders under $ISC_HOME/datasets/@ORGID at its next start,
     * datasets/datasets.c). A copy datasets of several organisations used stays with the
     * organisation of the earliest of them; the others' datasets are cached again, from
     * their own buckets with their own keys. */
    "UPDATE datasets SET state = 'created', reason = '', cached_bytes = 0, manifest_json = NULL "
    "WHERE state IN ('available', 'caching') AND instr(copy_name, '/') = 0 AND EXISTS ("
    "  SELECT 1 FROM datasets f WHERE f.copy_name = datasets.copy_name"
    "  AND f.org_id != datasets.org_id AND f.state IN ('available', 'caching')"
    "  AND (f.created_at_ms < datasets.created_at_ms"
    "       OR (f.created_at_ms = datasets.created_at_ms AND f.id < datasets.id)));"
    "UPDATE datasets SET copy_name = '@' || org_id || '/' || copy_name "
    "WHERE instr(copy_name, '/') = 0;",
    /* 16 (issue 29, tokens): the token a token was made with (NULL: made over the Unix socket).
     * A token made with a token expires no later than it and is revoked with it, and with
     * its children in turn (store_access.c). */
    "ALTER TABLE api_tokens ADD COLUMN parent_id TEXT REFERENCES api_tokens(id);"
    "CREATE INDEX api_tokens_parent ON api_tokens(parent_id);",
    /* issue 30: what the burst broker notes between steps, kept so that a restart of
     * iscd changes no decision (store/store_queue.h, broker/memo.c): why a waiting burst
     * waits (queue/burst.h's enum isc_burst_wait; its credits line and place follow from
     * it), the shapes excluded for the rest of its placement round, and the periodic
     * artifact sync clocks of clusters. */
    "CREATE TABLE burst_waits ("
    "  experiment_id TEXT PRIMARY KEY,"
    "  why INTEGER NOT NULL,"
    "  at_ms INTEGER NOT NULL);"
    "CREATE TABLE shape_exclusions ("
    "  experiment_id TEXT NOT NULL,"
    "  shape_id TEXT NOT NULL,"
    "  at_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (experiment_id, shape_id));"
    "CREATE TABLE sync_clocks ("
    "  cluster_id TEXT PRIMARY KEY,"
    "  checkpoints_at_ms INTEGER NOT NULL,"
    "  lossy_at_ms INTEGER NOT NULL);",
    /* issue 34 item 8: a pool node is 'unreachable' (was 'down') with the reason its last
     * SSH probe failed, and 'up' again once it answers (onprem/probe.c). SQLite cannot
     * change a CHECK in place, so the table is rebuilt; ids are AUTOINCREMENT from now on,
     * so a removed node's id (and the host key pinned under it) never names another. */
    "DROP TABLE IF EXISTS pool_nodes_v2;"
    "CREATE TABLE pool_nodes_v2 ("
    "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  host TEXT NOT NULL,"
    "  port INTEGER NOT NULL CHECK (port BETWEEN 1 AND 65535),"
    "  user TEXT NOT NULL,"
    "  gpus INTEGER NOT NULL CHECK (gpus >= 1),"
    "  state TEXT NOT NULL DEFAULT 'up' CHECK (state IN ('up','draining','unreachable')),"
    "  added_ms INTEGER NOT NULL,"
    "  reason TEXT NOT NULL DEFAULT '',"
    "  UNIQUE (host, port));"
    "INSERT INTO pool_nodes_v2 (id, host, port, user, gpus, state, added_ms, reason)"
    "  SELECT id, host, port, user, gpus,"
    "    CASE state WHEN 'down' THEN 'unreachable' ELSE state END, added_ms,"
    "    CASE state WHEN 'down' THEN 'stopped answering (before an upgrade of iscd)' ELSE '' END"
    "  FROM pool_nodes;"
    "DROP TABLE pool_nodes;"
    "ALTER TABLE pool_nodes_v2 RENAME TO pool_nodes;",
    /* issue 32: replacing only the lost nodes of a gang. A replacement cluster names the
     * cluster it replaces, the token of the gang launch whose placement (zone, placement
     * group, compact policy, compute cluster) its nodes join, and the ranks its launch
     * fills; a node of the replaced cluster that is kept carries the rank it takes in the
     * replacement until it is moved there (-1: not kept, or moved). */
    "ALTER TABLE clusters ADD COLUMN replaces TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE clusters ADD COLUMN placement_token TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE clusters ADD COLUMN fill_ranks TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE nodes ADD COLUMN next_rank INTEGER NOT NULL DEFAULT -1;",
    /* issue 35: the experiment listing's pages walk an index in the listing's order
     * (newest first, then id) from the cursor instead of sorting an org's experiments for
     * every page (store_experiments.c, isc_store_experiment_page): one per caller's view
     * (an org's admin, a member's own, the operator's all). The first replaces
     * experiments_org. IF [NOT] EXISTS: this step was written while others were added
     * beside it, and running it twice must change nothing. */
    "CREATE INDEX IF NOT EXISTS experiments_org_newest ON experiments(org_id, created_at_ms "
    "DESC, id);"
    "CREATE INDEX IF NOT EXISTS experiments_owner_newest ON experiments(org_id, owner, "
    "created_at_ms DESC, id);"
    "CREATE INDEX IF NOT EXISTS experiments_newest ON experiments(created_at_ms DESC, id);"
    "DROP INDEX IF EXISTS experiments_org;",
    /* issue 33: several iscd replicas on one store (docs/ha.md). A replica is a row it
     * registers and keeps heartbeating; a lease gives one replica the steps of one burst
     * until expires_ms (store/store_replicas.c). Times are the database's clock. The
     * same step in migrations_pg.c. */
    "CREATE TABLE replicas ("
    "  id TEXT PRIMARY KEY,"
    "  host TEXT NOT NULL,"
    "  pid BIGINT NOT NULL,"
    "  started_ms BIGINT NOT NULL,"
    "  heartbeat_ms BIGINT NOT NULL);"
    "CREATE TABLE leases ("
    "  experiment_id TEXT PRIMARY KEY,"
    "  replica_id TEXT NOT NULL,"
    "  token TEXT NOT NULL,"
    "  expires_ms BIGINT NOT NULL);"
    "CREATE INDEX leases_replica ON leases(replica_id);",
    /* issue 48: the broker_id every replica of the store must share (the instances'
     * isc:broker tag), recorded by the first replica to start; and each replica's boot id
     * beside its host and pid, so only a replica of this very host (this boot) whose pid
     * is gone is taken for dead at once (store/store_replicas.c). The same step in
     * migrations_pg.c. */
    "CREATE TABLE store_identity ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  broker_id TEXT NOT NULL,"
    "  set_by TEXT NOT NULL,"
    "  set_ms INTEGER NOT NULL);"
    "ALTER TABLE replicas ADD COLUMN boot_id TEXT NOT NULL DEFAULT '';"
    "ALTER TABLE replicas ADD COLUMN broker_id TEXT NOT NULL DEFAULT '';",
    /* 23, issue 49: the version of who may do what (docs/security.md, "The API's caches"). The
     * API's token and role caches are kept while it is unchanged, so they survive the commits
     * of running bursts. Triggers bump it in the same transaction as every write to the rows
     * those caches copy (tokens, memberships, users, an organisation's existence), so no
     * writer, present or future, can forget to. The same step in migrations_pg.c; isc store
     * copy leaves the row to the destination's triggers. */
    "CREATE TABLE auth_version ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  version INTEGER NOT NULL);"
    "INSERT INTO auth_version (id, version) VALUES (1, 1);"
    "CREATE TRIGGER auth_version_api_tokens_ins AFTER INSERT ON api_tokens BEGIN"
    "  UPDATE auth_version SET version = version + 1 WHERE id = 1; END;"
    "CREATE TRIGGER auth_version_api_tokens_upd AFTER UPDATE ON api_tokens BEGIN"
    "  UPDATE auth_version SET version = version + 1 WHERE id = 1; END;"
    "CREATE TRIGGER auth_version_api_tokens_del AFTER DELETE ON api_tokens BEGIN"
    "  UPDATE auth_version SET version = version + 1 WHERE id = 1; END;"
    "CREATE TRIGGER auth_version_memberships_ins AFTER INSERT ON memberships BEGIN"
    "  UPDATE auth_version SET version = version + 1 WHERE id = 1; END;"
    "CREATE TRIGGER auth_version_memberships_upd AFTER UPDATE ON memberships BEGIN"
    "  UPDATE auth_version SET version = version + 1 WHERE id = 1; END;"
    "CREATE TRIGGER auth_version_memberships_del AFTER DELETE ON memberships BEGIN"
    "  UPDATE auth_version SET version = version + 1 WHERE id = 1; END;"
    "CREATE TRIGGER auth_version_users_ins AFTER INSERT ON users BEGIN"
    "  UPDATE auth_version SET version = version + 1 WHERE id = 1; END;"
    "CREATE TRIGGER auth_version_users_upd AFTER UPDATE ON users BEGIN"
    "  UPDATE auth_version SET version = version + 1 WHERE id = 1; END;"
    "CREATE TRIGGER auth_version_users_del AFTER DELETE ON users BEGIN"
    "  UPDATE auth_version SET version = version + 1 WHERE id = 1; END;"
    "CREATE TRIGGER auth_version_orgs_ins AFTER INSERT ON orgs BEGIN"
    "  UPDATE auth_version SET version = version + 1 WHERE id = 1; END;"
    "CREATE TRIGGER auth_version_orgs_upd AFTER UPDATE OF id, name ON orgs BEGIN"
    "  UPDATE auth_version SET version = version + 1 WHERE id = 1; END;"
    "CREATE TRIGGER auth_version_orgs_del AFTER DELETE ON orgs BEGIN"
    "  UPDATE auth_version SET version = version + 1 WHERE id = 1; END;",
    /* 24, issue 49 (metering by intervals): a charge records in its own row the part of
     * its experiment's hold it consumed (consumed_micros, at most its amount), where a
     * 'release' row "consumed by a charge" stood beside every charge before: one row
     * per money move. The totals trigger subtracts it from reserved. Every row written
     * before has consumed_micros 0 and keeps its meaning, so no total changes (its old
     * releases stay releases). The same step in migrations_pg.c. */
    "ALTER TABLE ledger ADD COLUMN consumed_micros INTEGER NOT NULL DEFAULT 0"
    "  CHECK (consumed_micros >= 0 AND (consumed_micros = 0 OR (kind = 'charge'"
    "  AND billing = 'credits' AND consumed_micros <= amount_micros)));"
    /* the accrued cost of an experiment's open intervals reads its clusters' nodes */
    "CREATE INDEX IF NOT EXISTS clusters_experiment ON clusters(experiment_id);"
    "DROP TRIGGER ledger_totals_add;"
    "CREATE TRIGGER ledger_totals_add AFTER INSERT ON ledger BEGIN"
    "  INSERT OR IGNORE INTO ledger_totals (scope, key) VALUES ('org', CAST(NEW.org_id AS TEXT));"
    "  INSERT OR IGNORE INTO ledger_totals (scope, key)"
    "    SELECT 'project', NEW.project_id WHERE NEW.project_id IS NOT NULL;"
    "  INSERT OR IGNORE INTO ledger_totals (scope, key)"
    "    SELECT 'experiment', NEW.experiment_id WHERE NEW.experiment_id IS NOT NULL;"
    "  UPDATE ledger_totals SET"
    "    balance_micros = balance_micros + (CASE WHEN NEW.billing = 'credits' THEN"
    "      (CASE NEW.kind WHEN 'grant' THEN NEW.amount_micros WHEN 'refund' THEN NEW.amount_micros"
    "       WHEN 'adjustment' THEN NEW.amount_micros WHEN 'charge' THEN -NEW.amount_micros"
    "       ELSE 0 END) ELSE 0 END),"
    "    reserved_micros = reserved_micros + (CASE WHEN NEW.billing = 'credits' THEN"
    "      (CASE NEW.kind WHEN 'reserve' THEN NEW.amount_micros"
    "       WHEN 'release' THEN -NEW.amount_micros WHEN 'charge' THEN -NEW.consumed_micros"
    "       ELSE 0 END) ELSE 0 END),"
    "    spent_micros = spent_micros + (CASE WHEN NEW.billing = 'credits' AND"
    "      NEW.kind = 'charge' THEN NEW.amount_micros ELSE 0 END),"
    "    charged_micros = charged_micros +"
    "      (CASE WHEN NEW.kind = 'charge' THEN NEW.amount_micros ELSE 0 END)"
    "  WHERE (scope = 'org' AND key = CAST(NEW.org_id AS TEXT))"
    "     OR (scope = 'project' AND key = NEW.project_id)"
    "     OR (scope = 'experiment' AND key = NEW.experiment_id);"
    "END;",
    /* 25, issue 43 (live prices on every cloud): a live price now names the API it came from
     * (aws-spot-history, aws-price-list, gcp-billing-catalog, oci-price-list) instead of 'live', so
     * `isc shapes` can say which source, and how old, each price is. price_refreshes
     * keeps, per source, when it was last tried, when it last succeeded, how many
     * shapes it priced and why it last failed: a refresh that fails keeps the prices
     * (and their age) and says so here. The same step in migrations_pg.c. */
    "UPDATE shapes SET price_source = 'aws-spot-history' WHERE price_source = 'live';"
    "CREATE TABLE price_refreshes ("
    "  source TEXT PRIMARY KEY,"
    "  tried_at_ms INTEGER NOT NULL DEFAULT 0,"
    "  ok_at_ms INTEGER NOT NULL DEFAULT 0,"
    "  shapes INTEGER NOT NULL DEFAULT 0,"
    "  error TEXT NOT NULL DEFAULT '');",
    /* 26, issue 43 (rankings users can bank on): what each risk source said about losing a
     * burst's nodes (AWS Spot Advisor bands and placement scores, OCI capacity reports,
     * GCP capacity advice, this broker's own interruptions), one row per fact with when it
     * was fetched, so the ranking reads the last answer and shows its age
     * (store/store_risk.h, docs/shapes.md "Risk sources"). */
    "CREATE TABLE risk_facts ("
    "  provider TEXT NOT NULL,"
    "  region TEXT NOT NULL,"
    "  zone TEXT NOT NULL DEFAULT ''," /* '' for the whole region */
    "  instance_type TEXT NOT NULL,"
    "  market TEXT NOT NULL DEFAULT ''," /* spot | ondemand | '' (both) */
    "  source TEXT NOT NULL,"
    "  target INTEGER NOT NULL DEFAULT 0," /* the gang size asked about; 0: none */
    "  value INTEGER NOT NULL,"
    "  value2 INTEGER NOT NULL DEFAULT 0,"
    "  detail TEXT NOT NULL DEFAULT '',"
    "  fetched_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (provider, region, zone, instance_type, market, source, target));"
    /* changes with every write of risk_facts: readers that keep the facts know when to
     * read them again (store/store_risk.h, isc_store_risk_version) */
    "CREATE TABLE risk_version ("
    "  id INTEGER PRIMARY KEY CHECK (id = 1),"
    "  version INTEGER NOT NULL);"
    "INSERT INTO risk_version (id, version) VALUES (1, 0);",
    /* 27, issue 45 (checkpoints straight to object storage): the manifests of each
     * experiment's checkpoint versions in the bucket (artifacts/manifest.h). A row is
     * written only once every object of the version was completed and verified, so the
     * current version (the highest) is never torn; the previous one is kept until the
     * next is recorded. org_id and total_bytes count the organisation's quota without
     * reading the JSON. The same step in migrations_pg.c. */
    "CREATE TABLE artifact_manifests ("
    "  experiment_id TEXT NOT NULL REFERENCES experiments(id),"
    "  version INTEGER NOT NULL CHECK (version > 0),"
    "  org_id INTEGER NOT NULL REFERENCES orgs(id),"
    "  total_bytes INTEGER NOT NULL CHECK (total_bytes >= 0),"
    "  manifest_json TEXT NOT NULL,"
    "  created_at_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (experiment_id, version));"
    "CREATE INDEX artifact_manifests_org ON artifact_manifests(org_id);",
    /* 28, issue 45 (replicas with no shared folder): rank logs as rows of the store, so
     * every replica's API reads what the replica following a burst wrote. A row is one
     * batch of a rank's output (at most 256 KiB, a second's worth at most), keyed by
     * its experiment, rank and the byte offset where it starts; cluster_id says which
     * cluster's follow wrote it. No foreign key: the rows go with nothing else, and a
     * follow's batch must never fail on the experiment's row. The same step in
     * migrations_pg.c. */
    "CREATE TABLE rank_logs ("
    "  experiment_id TEXT NOT NULL,"
    "  rank INTEGER NOT NULL CHECK (rank >= 0),"
    "  off INTEGER NOT NULL CHECK (off >= 0),"
    "  len INTEGER NOT NULL CHECK (len > 0 AND len <= 262144),"
    "  cluster_id TEXT NOT NULL DEFAULT '',"
    "  data BLOB NOT NULL,"
    "  created_at_ms INTEGER NOT NULL,"
    "  PRIMARY KEY (experiment_id, rank, off));",
    /* 29, issue 45: each cluster's SSH private key sealed under the keys' master key
     * (keys/vault.c; associated data names the cluster), where a file under
     * $ISC_HOME/keys stood: a replica that takes a burst over reaches its nodes with
     * nothing shared but the store and the master key. Existing key files are moved
     * in by iscd at its start (broker/clusterkeys.c), since SQL cannot seal. The same
     * step in migrations_pg.c. */
    "CREATE TABLE cluster_ssh_keys ("
    "  cluster_id TEXT PRIMARY KEY,"
    "  nonce BLOB NOT NULL,"
    "  ciphertext BLOB NOT NULL,"
    "  created_at_ms INTEGER NOT NULL);",
};

size_t isc_store_migration_count(void)
{
	return sizeof(migrations) / sizeof(migrations[0]);
}

const char *isc_store_migration_sql(size_t index)
{
	return index < isc_store_migration_count() ? migrations[index] : NULL;
}
