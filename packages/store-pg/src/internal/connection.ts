/**
 * Connections to PostgreSQL: the pool every query goes through, how a driver failure becomes
 * the port's `Unavailable`, and the names (schema, tenant, NOTIFY channel) that are spliced
 * into SQL text, which are validated here so that splicing them is safe.
 */
import pg from "pg"
import { StoreError } from "@koder/fleet-core"

/** Schema and tenant names: lower-case identifiers, short enough for role and channel names. */
const namePattern = /^[a-z_][a-z0-9_]{0,29}$/

/** Whether `name` may be a schema name. */
export const isValidSchema = (name: string): boolean => namePattern.test(name) && !name.startsWith("pg_")

/** Whether `tenant` may be a tenant id (the empty string is the default, untenanted store). */
export const isValidTenant = (tenant: string): boolean => tenant === "" || /^[a-z0-9_]{1,30}$/.test(tenant)

/** The role whose members may read and write `tenant`'s rows. */
export const tenantRole = (tenant: string): string => `fleet_tenant_${tenant}`

/** The NOTIFY channel of one tenant of one schema (the payload is the new head revision). */
export const channel = (schema: string, tenant: string): string => `fleet.${schema}.${tenant}`

/** A SQL string literal of a validated name (schema or tenant). */
export const literal = (name: string): string => `'${name}'`

/** What a failure during an operation was. */
export type FailureKind = "connection" | "transient" | "fatal"

const connectionCodes = new Set(["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "EHOSTUNREACH", "ENETUNREACH", "ENOTFOUND", "EAI_AGAIN"])

const codeOf = (e: unknown): string | undefined =>
  typeof e === "object" && e !== null && "code" in e && typeof e.code === "string" ? e.code : undefined

/** Whether the error is the connection failing (as opposed to a statement failing on a live one). */
export const classify = (e: unknown): FailureKind => {
  const code = codeOf(e)
  if (code !== undefined) {
    if (connectionCodes.has(code)) return "connection"
    // 08: connection exception; 57P01-03: admin/crash shutdown, cannot connect now.
    if (code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03") return "connection"
    // 40001 serialization, 40P01 deadlock, 53xxx insufficient resources, 55P03 lock not available.
    if (code.startsWith("40") || code.startsWith("53") || code === "55P03" || code === "57014") return "transient"
    return "fatal"
  }
  const message = e instanceof Error ? e.message : String(e)
  if (/terminat|connection|timeout|closed|ended|not queryable|socket/i.test(message)) return "connection"
  return "fatal"
}

/** The message of any thrown value. */
export const messageOf = (e: unknown): string => (e instanceof Error ? e.message : String(e))

/**
 * The port's failure for a driver error during `what`. Connection trouble and transient server
 * conditions are retryable; anything else (a permission error, a bug) is not.
 */
export const unavailable = (what: string, e: unknown): StoreError.Unavailable => {
  const kind = classify(e)
  const reason =
    kind === "connection"
      ? `${what}: PostgreSQL connection lost or unreachable (${messageOf(e)}); retry when it is back`
      : `${what}: ${messageOf(e)}`
  return new StoreError.Unavailable({ reason, retryable: kind !== "fatal" })
}

/** Settings shared by the pool and the LISTEN connection. */
export interface ConnectOptions {
  readonly url: string
  readonly applicationName: string
  readonly tenant: string
}

/** Client settings: the tenant is also the session default, so one-statement reads need no SET. */
export const clientConfig = (options: ConnectOptions): pg.ClientConfig => ({
  connectionString: options.url,
  application_name: options.applicationName,
  options: `-c fleet.tenant=${options.tenant}`,
  connectionTimeoutMillis: 5_000,
  keepAlive: true
})

/** A pool that survives its connections being killed: idle ones are dropped and replaced lazily. */
export const makePool = (options: ConnectOptions & { readonly size: number }): pg.Pool => {
  const pool = new pg.Pool({ ...clientConfig(options), max: options.size, idleTimeoutMillis: 30_000 })
  // An idle client whose backend dies emits here; the pool discards it. Without a listener the
  // process would crash on the 'error' event.
  pool.on("error", () => {})
  // A checked-out client whose socket fails between two queries emits 'error' too; the next
  // query on it fails and the holder releases it as broken, so nothing more is needed here.
  pool.on("connect", (client) => client.on("error", () => {}))
  return pool
}

/** Parse an int8 that the driver hands over as a string. */
export const int = (value: unknown): number => (typeof value === "number" ? value : Number(value))
