/**
 * The store's tables in their own PostgreSQL schema, as versioned migrations. Opening a store
 * runs `ensure`: inside one transaction holding a transaction-scoped advisory lock keyed by the
 * schema name (so servers starting together take turns), it recognises the schema as ours,
 * empty or foreign, refuses a newer version, and applies the pending migrations.
 *
 *   BEGIN ─▶ pg_advisory_xact_lock ─▶ inspect (absent | empty | ours vN | foreign) ─▶ migrate ─▶ COMMIT
 *
 * Tables (schema v1):
 *   kv       the MVCC log: one row per revision per tenant; value NULL is a tombstone;
 *            prev_revision links a row to its key's previous row (0 for the first)
 *   tenants  per tenant: the head revision (the counter row writers lock) and the compaction horizon
 *   meta     format id and schema_version
 * Row-level security is forced on all three; see `tenantPolicy`.
 */
import type pg from "pg"
import { ForeignSchema, MigrationFailed, SchemaTooNew, type PgStoreError } from "../PgStoreError.js"
import { messageOf } from "./connection.js"

/** The `format` row of the meta table. */
export const formatName = "koder-fleet-store"

/** First key of every advisory lock this store takes ("KFLT"); the second is per schema/tenant. */
export const lockSpace = 0x4b464c54

/** Second advisory-lock keys (with the schema's or tenant's name hashed in by the caller's SQL). */
export const lockKind = { migrate: 1, compact: 2 } as const

/**
 * The policy expression of tenant rows: the row's tenant is the one this transaction or session
 * names in `fleet.tenant`, AND the connecting role is a member of that tenant's role. Setting
 * the GUC by hand therefore gains nothing without the role. The membership check is a scalar
 * subquery over the GUC, not the row, so PostgreSQL runs it once per statement (an InitPlan).
 */
const tenantPolicy = (s: string) =>
  `tenant = current_setting('fleet.tenant', true) AND (SELECT ${s}.tenant_allowed(current_setting('fleet.tenant', true)))`

/**
 * The schema, one migration per version: `migrations[i]` takes a schema from version i to i + 1,
 * given the schema's (validated) name. All pending ones run in one transaction. To change the
 * schema, append; never edit a released migration.
 */
export const migrations: ReadonlyArray<(s: string) => string> = [
  (s) => `
    CREATE TABLE ${s}.meta (
      name  text PRIMARY KEY,
      value text NOT NULL
    );
    CREATE TABLE ${s}.tenants (
      tenant           text COLLATE "C" PRIMARY KEY,
      revision         bigint NOT NULL,
      compact_revision bigint NOT NULL
    );
    CREATE TABLE ${s}.kv (
      tenant          text COLLATE "C" NOT NULL,
      revision        bigint NOT NULL,
      key             text COLLATE "C" NOT NULL,
      value           text,
      create_revision bigint NOT NULL,
      prev_revision   bigint NOT NULL,
      version         bigint NOT NULL,
      committed_at    timestamptz NOT NULL,
      PRIMARY KEY (tenant, revision)
    );
    CREATE INDEX kv_key_revision ON ${s}.kv (tenant, key, revision);

    -- Who may act for tenant t: for the default tenant '', members of the schema's owner;
    -- otherwise members of the role fleet_tenant_<t>. (Superusers bypass row-level security.)
    CREATE FUNCTION ${s}.tenant_allowed(t text) RETURNS boolean
      LANGUAGE sql STABLE SET search_path = pg_catalog AS $fn$
        SELECT CASE
          WHEN t IS NULL THEN false
          WHEN t = '' THEN pg_has_role(current_user,
            (SELECT nspowner FROM pg_namespace WHERE nspname = '${s}'), 'MEMBER')
          ELSE EXISTS (SELECT 1 FROM pg_roles r
                       WHERE r.rolname = 'fleet_tenant_' || t AND pg_has_role(current_user, r.oid, 'MEMBER'))
        END
      $fn$;

    ALTER TABLE ${s}.kv ENABLE ROW LEVEL SECURITY;
    ALTER TABLE ${s}.kv FORCE ROW LEVEL SECURITY;
    CREATE POLICY tenant_rows ON ${s}.kv USING (${tenantPolicy(s)}) WITH CHECK (${tenantPolicy(s)});
    ALTER TABLE ${s}.tenants ENABLE ROW LEVEL SECURITY;
    ALTER TABLE ${s}.tenants FORCE ROW LEVEL SECURITY;
    CREATE POLICY tenant_rows ON ${s}.tenants USING (${tenantPolicy(s)}) WITH CHECK (${tenantPolicy(s)});
    ALTER TABLE ${s}.meta ENABLE ROW LEVEL SECURITY;
    ALTER TABLE ${s}.meta FORCE ROW LEVEL SECURITY;
    CREATE POLICY meta_read ON ${s}.meta FOR SELECT USING (true);
    CREATE POLICY meta_owner ON ${s}.meta USING ((SELECT ${s}.tenant_allowed(''))) WITH CHECK ((SELECT ${s}.tenant_allowed('')));

    INSERT INTO ${s}.meta (name, value) VALUES ('format', '${formatName}');
  `
]

/** The schema version this code writes. */
export const schemaVersion = migrations.length

type Inspection =
  | { readonly kind: "absent" }
  | { readonly kind: "empty" }
  | { readonly kind: "ours"; readonly version: number }
  | { readonly kind: "foreign"; readonly reason: string }

const inspect = async (client: pg.ClientBase, schema: string): Promise<Inspection> => {
  const ns = await client.query("SELECT 1 FROM pg_namespace WHERE nspname = $1", [schema])
  if (ns.rowCount === 0) return { kind: "absent" }
  const rel = await client.query<{ relname: string }>(
    `SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname = $1 AND c.relkind IN ('r', 'v', 'm', 'p', 'f') ORDER BY c.relname`,
    [schema]
  )
  const tables = rel.rows.map((r) => r.relname)
  if (tables.length === 0) return { kind: "empty" }
  if (!tables.includes("meta")) return { kind: "foreign", reason: `it has tables (${tables.slice(0, 5).join(", ")}) but no meta table` }
  const meta = await client.query<{ name: string; value: string }>(`SELECT name, value FROM ${schema}.meta`)
  const values = new Map(meta.rows.map((r) => [r.name, r.value]))
  if (values.get("format") !== formatName) {
    return { kind: "foreign", reason: `meta format is ${JSON.stringify(values.get("format"))}, not "${formatName}"` }
  }
  const version = Number(values.get("schema_version"))
  if (!Number.isSafeInteger(version) || version < 1) {
    return { kind: "foreign", reason: `meta schema_version is ${JSON.stringify(values.get("schema_version"))}` }
  }
  return { kind: "ours", version }
}

/**
 * Create or migrate `schema` (already validated) on `client`, under the migration lock. Resolves
 * with the failure instead of throwing, so the caller can hand it on as a typed error.
 */
export const ensure = async (client: pg.ClientBase, schema: string): Promise<PgStoreError | undefined> => {
  let failure: PgStoreError | undefined
  try {
    await client.query("BEGIN")
    await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [lockSpace + lockKind.migrate, schema])
    const found = await inspect(client, schema)
    if (found.kind === "foreign") {
      failure = new ForeignSchema({ schema, reason: found.reason })
    } else {
      const version = found.kind === "ours" ? found.version : 0
      if (version > schemaVersion) {
        failure = new SchemaTooNew({ schema, schemaVersion: version, supportedVersion: schemaVersion })
      } else if (version < schemaVersion) {
        if (found.kind === "absent") await client.query(`CREATE SCHEMA ${schema}`)
        for (let v = version; v < schemaVersion; v++) await client.query(migrations[v]!(schema))
        await client.query(
          `INSERT INTO ${schema}.meta (name, value) VALUES ('schema_version', $1)
           ON CONFLICT (name) DO UPDATE SET value = excluded.value`,
          [String(schemaVersion)]
        )
      }
    }
    await client.query(failure === undefined ? "COMMIT" : "ROLLBACK")
    return failure
  } catch (e) {
    await client.query("ROLLBACK").catch(() => undefined)
    return new MigrationFailed({ schema, reason: messageOf(e) })
  }
}
