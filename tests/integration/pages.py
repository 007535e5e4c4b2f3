"""Walks every paged listing of iscd's API (docs/api.md, "Pages") over TCP.

Called by pages.sh with the store's path, iscd's URL and bearer tokens (the
operator's, and those of alice and bob) in the environment. For each listing
and caller it walks the pages with a small limit, inserting rows between page
fetches (some sort before the cursor, some after), and checks that every row
that existed before the walk appears exactly once, in the listing's documented
order; that the caller sees no row it may not (what it may see is computed
here from the store with SQL of its own); that a limit of 1 and of 1000 give
the same rows; and that a cursor of another listing's form is refused (400).

Prints one line per check: "ok DESCRIPTION" or "FAIL DESCRIPTION: why".
"""
import json
import os
import sqlite3
import sys
import urllib.error
import urllib.parse
import urllib.request

DB = os.environ["PAGES_DB"]
URL = os.environ["PAGES_URL"]
TOKENS = {
    "operator": os.environ["PAGES_TOKEN_OPERATOR"],
    "alice": os.environ["PAGES_TOKEN_ALICE"],
    "bob": os.environ["PAGES_TOKEN_BOB"],
}
failures = 0


def report(ok, what, why=""):
    global failures
    if ok:
        print("ok " + what)
    else:
        failures += 1
        print("FAIL " + what + (": " + why if why else ""))


def get(who, path):
    """(status, rows, X-Isc-Next) of GET path as who."""
    req = urllib.request.Request(URL + path, headers={"Authorization": "Bearer " + TOKENS[who]})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.load(resp), resp.headers.get("X-Isc-Next")
    except urllib.error.HTTPError as e:
        return e.code, None, None


def db():
    con = sqlite3.connect(DB, timeout=30)
    con.execute("PRAGMA busy_timeout = 30000")
    return con


def sql(query, args=()):
    con = db()
    try:
        return con.execute(query, args).fetchall()
    finally:
        con.close()


def write(query, args=()):
    con = db()
    try:
        con.execute(query, args)
        con.commit()
    finally:
        con.close()


def walk(who, path, limit, between=None):
    """Every page of path, following X-Isc-Next; between(page_number) runs after each page."""
    rows, after, pages = [], None, 0
    sep = "&" if "?" in path else "?"
    while True:
        q = path + sep + "limit=%d" % limit
        if after:
            q += "&after=" + urllib.parse.quote(after, safe="")
        status, page, after = get(who, q)
        if status != 200:
            raise RuntimeError("%s %s answered %d" % (who, q, status))
        if len(page) > limit:
            raise RuntimeError("%s %s gave %d rows" % (who, q, len(page)))
        rows += page
        pages += 1
        if between:
            between(pages)
        if not after:
            return rows, pages
        if pages > 10000:
            raise RuntimeError("no last page")


# Each listing: its path, the row's key, the order's sort key (as documented), and for each
# caller the rows it may see (SQL of this test, not iscd's), as keys.
def exp_sort(r):
    return (-r["created_at_ms"], r["id"])


USER = {"alice": 9001, "bob": 9002}


def visible_experiments(who):
    if who == "operator":
        q, a = "SELECT id FROM experiments", ()
    else:
        q = ("SELECT e.id FROM experiments e JOIN memberships m ON m.org_id = e.org_id "
             "AND m.user_id = ? WHERE m.role = 'admin' OR (m.role = 'member' AND e.owner = ?)")
        a = (USER[who], who)
    return {r[0] for r in sql(q, a)}


def visible_orgs(who):
    if who == "operator":
        return {r[0] for r in sql("SELECT name FROM orgs")}
    return {r[0] for r in sql("SELECT o.name FROM orgs o JOIN memberships m ON m.org_id = o.id "
                              "WHERE m.user_id = ?", (USER[who],))}


def visible_projects(who):
    q = "SELECT o.name, p.name FROM projects p JOIN orgs o ON o.id = p.org_id"
    if who == "operator":
        return {(a, b) for a, b in sql(q)}
    return {(a, b) for a, b in sql(q + " JOIN memberships m ON m.org_id = o.id AND m.user_id = ?",
                                   (USER[who],))}


def visible_keys(who):
    q = "SELECT o.name, k.provider, k.name FROM cloud_keys k JOIN orgs o ON o.id = k.org_id"
    if who == "operator":
        return set(sql(q))
    return set(sql(q + " JOIN memberships m ON m.org_id = o.id AND m.user_id = ? "
                   "AND m.role = 'admin'", (USER[who],)))


def visible_tokens(who):
    if who == "operator":
        return {r[0] for r in sql("SELECT id FROM api_tokens")}
    return {r[0] for r in sql("SELECT id FROM api_tokens WHERE user_id = ?", (USER[who],))}


def visible_members(org):
    return {r[0] for r in sql("SELECT u.name FROM memberships m JOIN users u ON u.id = m.user_id "
                              "JOIN orgs o ON o.id = m.org_id WHERE o.name = ?", (org,))}


counter = [0]


def fresh(prefix):
    counter[0] += 1
    return "%s%04d" % (prefix, counter[0])


# Inserts between pages: one row that sorts first and one that sorts last in each listing.
def insert_experiment(org_id, owner, at_ms):
    eid = "exp_%016x" % (0xE000000 + counter[0])
    counter[0] += 1
    write("INSERT INTO experiments (id, project_id, org_id, name, compute_mode, gpus, spec_json, "
          "status, created_at_ms, updated_at_ms, output_path, owner) VALUES "
          "(?, (SELECT id FROM projects WHERE org_id = ? LIMIT 1), ?, 'late', 'burst', 1, '{}', "
          "'completed', ?, ?, '/tmp/x', ?)", (eid, org_id, org_id, at_ms, at_ms, owner))


def ins_experiments(_):
    insert_experiment(1, "alice", 9_000_000_000_000)  # newest: before any cursor
    insert_experiment(2, "alice", 1)                  # oldest: after every cursor


def ins_names(table):
    def ins(_):
        for name in (fresh("aa"), fresh("zz")):
            write("INSERT INTO %s (name, created_at_ms) VALUES (?, 0)" % table, (name,))
    return ins


def ins_projects(_):
    for org in (1, 2):
        for name in (fresh("aa"), fresh("zz")):
            write("INSERT INTO projects (id, org_id, name, created_at_ms) VALUES (?, ?, ?, 0)",
                  ("prj_" + name, org, name))


def ins_keys(_):
    for org in (1, 2):
        for name in (fresh("aa"), fresh("zz")):
            write("INSERT INTO cloud_keys (id, org_id, provider, name, nonce, ciphertext, "
                  "created_at_ms) VALUES (?, ?, 'aws', ?, x'00', x'00', 0)",
                  ("key_" + name, org, name))


def ins_tokens(_):
    for uid, at in ((USER["alice"], 0), (USER["alice"], 9_000_000_000_000), (None, 5)):
        write("INSERT INTO api_tokens (id, user_id, hash, created_at_ms) VALUES (?, ?, 'x', ?)",
              ("tok_" + fresh("t"), uid, at))


def ins_members(_):
    for name in (fresh("aa"), fresh("zz")):
        write("INSERT INTO users (name, created_at_ms) VALUES (?, 0)", (name,))
        write("INSERT INTO memberships (user_id, org_id, role, created_at_ms) VALUES "
              "((SELECT id FROM users WHERE name = ?), 1, 'member', 0)", (name,))


LISTINGS = [
    # name, path, key of a row, sort key, visible(who) -> keys, inserter, callers
    ("experiments", "/v1/experiments", lambda r: r["id"], exp_sort, visible_experiments,
     ins_experiments, ["operator", "alice", "bob"]),
    ("users", "/v1/users", lambda r: r["name"], lambda r: r["name"],
     lambda who: {r[0] for r in sql("SELECT name FROM users")}, ins_names("users"), ["operator"]),
    ("orgs", "/v1/orgs", lambda r: r["name"], lambda r: r["name"], visible_orgs,
     ins_names("orgs"), ["operator", "alice", "bob"]),
    ("projects", "/v1/projects", lambda r: (r["org"], r["name"]), lambda r: (r["org"], r["name"]),
     visible_projects, ins_projects, ["operator", "alice", "bob"]),
    ("keys", "/v1/keys", lambda r: (r["org"], r["provider"], r["name"]),
     lambda r: (r["org"], r["provider"], r["name"]), visible_keys, ins_keys,
     ["operator", "alice", "bob"]),
    ("tokens", "/v1/tokens", lambda r: r["id"], lambda r: (r["created_at_ms"], r["id"]),
     visible_tokens, ins_tokens, ["operator", "alice", "bob"]),
    ("members", "/v1/members?org=org01", lambda r: r["user"], lambda r: r["user"],
     lambda who: visible_members("org01"), ins_members, ["operator", "alice"]),
]


def main():
    for name, path, key, order, visible, insert, callers in LISTINGS:
        for who in callers:
            what = "%s as %s" % (name, who)
            before = visible(who)
            try:
                rows, pages = walk(who, path, 7, insert)
            except RuntimeError as e:
                report(False, what + ": pages of 7 while rows are added", str(e))
                continue
            keys = [key(r) for r in rows]
            after = visible(who)
            report(pages > 2 or len(before) <= 14,
                   what + ": %d rows came in %d pages of 7" % (len(rows), pages))
            report(len(keys) == len(set(keys)), what + ": no row twice", str(
                [k for k in keys if keys.count(k) > 1][:3]))
            report(before <= set(keys), what + ": every row of before the walk", str(
                sorted(before - set(keys))[:3]))
            report(set(keys) <= after, what + ": no row the caller may not see", str(
                sorted(set(keys) - after)[:3]))
            sorts = [order(r) for r in rows]
            report(all(a < b for a, b in zip(sorts, sorts[1:])), what + ": in the listing's order")
            # Quiet now: a limit of 1 and one page of 1000 give the same rows.
            try:
                one, _ = walk(who, path, 1)
                whole, wpages = walk(who, path, 1000)
            except RuntimeError as e:
                report(False, what + ": pages of 1 and 1000", str(e))
                continue
            report([key(r) for r in one] == [key(r) for r in whole] and wpages == 1 and
                   {key(r) for r in whole} == after,
                   what + ": pages of 1 are the one page of 1000, and what the caller may see")
        # A cursor is checked: garbage, or an empty part, is 400.
        sep = "&" if "?" in path else "?"
        bad = {"experiments": "x", "tokens": "x", "projects": "org01", "keys": "org01/aws",
               "users": None, "orgs": None, "members": None}[name]
        if bad:
            status, _, _ = get("operator", path + sep + "after=" + urllib.parse.quote(bad))
            report(status == 400, "%s: the cursor '%s' is refused (400)" % (name, bad),
                   "got %d" % status)
    status, _, _ = get("operator", "/v1/orgs?limit=0")
    report(status == 400, "a limit of 0 is refused (400)", "got %d" % status)
    status, _, _ = get("operator", "/v1/users?limit=1001")
    report(status == 400, "a limit of 1001 is refused (400)", "got %d" % status)
    # bob is no member of org01: its members are not his to list.
    status, _, _ = get("bob", "/v1/members?org=org01&limit=3")
    report(status == 404, "bob cannot page org01's members (404)", "got %d" % status)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
