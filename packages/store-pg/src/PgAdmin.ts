/**
 * Operator steps that need more privilege than a running store: creating or migrating the
 * schema ahead of time, and creating a tenant's role (the role whose members may read and write
 * that tenant's rows under row-level security). Run them as the schema's owner or a superuser.
 *
 *   PgAdmin.migrate({ url, schema })                                   create / migrate the tables
 *   PgAdmin.createTenantRole({ url, schema, tenant, grantTo: "app" })  fleet_tenant_<tenant> + grants
 */
import { Effect } from "effect"
import pg from "pg"
import * as Connection from "./internal/connection.js"
import * as Schema from "./internal/schema.js"
import { ConnectFailed, InvalidConfig, MigrationFailed, type PgStoreError } from "./PgStoreError.js"

/** Where the store lives. */
export interface Target {
  readonly url: string
  /** Default "fleet". */
  readonly schema?: string
}

const withClient = <A>(target: Target, f: (client: pg.Client, schema: string) => Promise<A | PgStoreError>): Effect.Effect<A, PgStoreError> =>
  Effect.flatMap(
    Effect.tryPromise({
      try: async (): Promise<A | PgStoreError> => {
        const schema = target.schema ?? "fleet"
        if (!Connection.isValidSchema(schema)) return new InvalidConfig({ reason: `schema ${JSON.stringify(schema)} is not a valid store schema name` })
        const client = new pg.Client({ connectionString: target.url, application_name: "koder-fleet-admin" })
        client.on("error", () => {})
        try {
          await client.connect()
        } catch (e) {
          return new ConnectFailed({ schema, reason: Connection.messageOf(e) })
        }
        try {
          return await f(client, schema)
        } finally {
          await client.end().catch(() => undefined)
        }
      },
      catch: (e) => new MigrationFailed({ schema: target.schema ?? "fleet", reason: Connection.messageOf(e) })
    }),
    (result) => (isError(result) ? Effect.fail(result) : Effect.succeed(result as A))
  )

const isError = (value: unknown): value is PgStoreError =>
  typeof value === "object" && value !== null && "_tag" in value &&
  ["InvalidConfig", "ConnectFailed", "ForeignSchema", "SchemaTooNew", "MigrationFailed", "AccessDenied"].includes((value as { _tag: string })._tag)

/** Create or migrate the store's schema (what opening a store does first), without opening one. */
export const migrate = (target: Target): Effect.Effect<void, PgStoreError> =>
  withClient(target, async (client, schema) => (await Schema.ensure(client, schema)) ?? undefined)

/** The name of a tenant's role. */
export const tenantRole = (tenant: string): string => Connection.tenantRole(tenant)

/**
 * Create (if missing) the NOLOGIN role `fleet_tenant_<tenant>`, grant it what a tenant's store
 * needs on the schema (migrating the schema first), and grant the role to `grantTo` (the login
 * role the tenant's servers connect as), if given. Idempotent.
 */
export const createTenantRole = (options: Target & { readonly tenant: string; readonly grantTo?: string }): Effect.Effect<string, PgStoreError> =>
  withClient(options, async (client, schema) => {
    if (options.tenant === "" || !Connection.isValidTenant(options.tenant)) {
      return new InvalidConfig({ reason: `tenant ${JSON.stringify(options.tenant)} must match [a-z0-9_]{1,30}` })
    }
    const migrated = await Schema.ensure(client, schema)
    if (migrated !== undefined) return migrated
    const role = Connection.tenantRole(options.tenant)
    const r = client.escapeIdentifier(role)
    try {
      await client.query("BEGIN")
      await client.query("SELECT pg_advisory_xact_lock($1, hashtext($2))", [Schema.lockSpace + Schema.lockKind.migrate, role])
      const exists = await client.query("SELECT 1 FROM pg_roles WHERE rolname = $1", [role])
      if (exists.rowCount === 0) await client.query(`CREATE ROLE ${r} NOLOGIN`)
      await client.query(`GRANT USAGE ON SCHEMA ${schema} TO ${r}`)
      await client.query(`GRANT SELECT ON ${schema}.meta TO ${r}`)
      await client.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ${schema}.kv, ${schema}.tenants TO ${r}`)
      if (options.grantTo !== undefined) await client.query(`GRANT ${r} TO ${client.escapeIdentifier(options.grantTo)}`)
      await client.query("COMMIT")
      return role
    } catch (e) {
      await client.query("ROLLBACK").catch(() => undefined)
      return new MigrationFailed({ schema, reason: `creating role ${role}: ${Connection.messageOf(e)}` })
    }
  })
