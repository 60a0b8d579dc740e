/**
 * Why a PostgreSQL store could not be opened. Each names the database schema it was opening, so
 * an operator knows where to look. Failures of individual operations after opening are the
 * Store port's own errors (`Unavailable{retryable}` for connection trouble).
 */
import { Data } from "effect"

/** The configuration is unusable (bad schema or tenant name, bad pool size). */
export class InvalidConfig extends Data.TaggedError("InvalidConfig")<{
  readonly reason: string
}> {
  override get message() {
    return `invalid PostgreSQL store configuration: ${this.reason}`
  }
}

/** PostgreSQL could not be reached or refused the connection (network, authentication). */
export class ConnectFailed extends Data.TaggedError("ConnectFailed")<{
  readonly schema: string
  readonly reason: string
}> {
  override get message() {
    return `cannot connect to PostgreSQL for store schema "${this.schema}": ${this.reason}`
  }
}

/** The schema holds tables that are not a Koder Fleet store; refusing to touch them. */
export class ForeignSchema extends Data.TaggedError("ForeignSchema")<{
  readonly schema: string
  readonly reason: string
}> {
  override get message() {
    return `PostgreSQL schema "${this.schema}" is not a Koder Fleet store (${this.reason}); refusing to use it`
  }
}

/** The schema was written by a newer Koder Fleet whose schema this code does not know. */
export class SchemaTooNew extends Data.TaggedError("SchemaTooNew")<{
  readonly schema: string
  readonly schemaVersion: number
  readonly supportedVersion: number
}> {
  override get message() {
    return (
      `PostgreSQL schema "${this.schema}" has store schema version ${this.schemaVersion}, but this Koder Fleet ` +
      `supports up to version ${this.supportedVersion}; upgrade Koder Fleet to use it`
    )
  }
}

/** Creating or migrating the schema failed (most often: the role lacks the privileges). */
export class MigrationFailed extends Data.TaggedError("MigrationFailed")<{
  readonly schema: string
  readonly reason: string
}> {
  override get message() {
    return `cannot create or migrate store schema "${this.schema}": ${this.reason}`
  }
}

/** The connecting role may not act for the tenant (it is not a member of the tenant's role). */
export class AccessDenied extends Data.TaggedError("AccessDenied")<{
  readonly schema: string
  readonly tenant: string
  readonly reason: string
}> {
  override get message() {
    return (
      `the PostgreSQL role may not use tenant "${this.tenant}" of store schema "${this.schema}" (${this.reason}); ` +
      `grant it the tenant's role (PgAdmin.createTenantRole) or connect as a member`
    )
  }
}

/** Any failure of opening a PostgreSQL store or running an admin step. */
export type PgStoreError = InvalidConfig | ConnectFailed | ForeignSchema | SchemaTooNew | MigrationFailed | AccessDenied
