// Test support: the PostgreSQL to test against, fresh schemas dropped afterwards, and one-shot admin SQL.
import { randomBytes } from "node:crypto"
import { Effect, Layer, type Scope } from "effect"
import pg from "pg"
import type { Store } from "@koder/fleet-core"
import { PgStore } from "../src/index.js"

/** The database tests use (`FLEET_TEST_PG_URL`). */
export const testUrl = process.env.FLEET_TEST_PG_URL ?? "postgres://postgres@127.0.0.1:5432/postgres"

/** A name unlikely to collide with anyone else's test run. */
export const randomName = (prefix: string): string => `${prefix}_${randomBytes(5).toString("hex")}`

/** Run SQL on a short-lived admin connection. */
export const adminQuery = async (sql: string, params: Array<unknown> = [], url = testUrl): Promise<pg.QueryResult> => {
  const client = new pg.Client({ connectionString: url, application_name: "fleet-test-admin" })
  client.on("error", () => {})
  await client.connect()
  try {
    return await client.query(sql, params)
  } finally {
    await client.end()
  }
}

/** `url` with another user. */
export const urlAs = (user: string, url = testUrl): string => {
  const u = new URL(url)
  u.username = user
  u.password = ""
  return u.toString()
}

/** A fresh schema name for the scope; the schema (whoever created it) is dropped on release. */
export const freshSchema: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.sync(() => randomName("fleet_test")),
  (schema) => Effect.promise(() => adminQuery(`DROP SCHEMA IF EXISTS ${schema} CASCADE`).catch(() => undefined))
)

/** A store on a new schema every time the layer is built. */
export const freshLayer = (config: Omit<PgStore.Config, "url" | "schema"> = {}): Layer.Layer<Store.Store, unknown> =>
  Layer.unwrapScoped(Effect.map(freshSchema, (schema) => PgStore.layer({ ...config, url: testUrl, schema })))

/** Poll `check` until it returns true, or fail after `ms`. */
export const eventually = async (check: () => boolean | Promise<boolean>, ms = 15_000, what = "condition"): Promise<void> => {
  const deadline = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 20))
  }
}
