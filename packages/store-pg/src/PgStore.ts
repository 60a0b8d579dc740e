/**
 * The Store port on PostgreSQL (DESIGN §4): several server processes share one database. Each
 * tenant has one dense, commit-ordered revision sequence (a counter row locked by every write
 * transaction), writes are group-committed, and watches are woken by LISTEN/NOTIFY but read by
 * revision, so no process ever misses an event.
 *
 *   writers ─▶ group commit ─▶ BEGIN · heads · lock counter │ INSERT+UPDATE+NOTIFY · COMMIT
 *                                   │ local events, in turn                 │ NOTIFY rev
 *                                   ▼                                       ▼ (every process)
 *   watchers ◀── WatchFeed ring ◀── publish ◀──── poller: SELECT revision > head ◀── LISTEN
 *                     └── behind the ring? ── history: SELECT … WHERE revision in (last, upTo]
 *   readers ─▶ get / list / count: one statement, one snapshot (pool)
 *   compactor (scoped fiber) ─▶ CompactionPolicy.nextStep ─▶ try-lock ─▶ delete superseded rows
 */
import { CompactionPolicy, ContinueToken, FleetMetrics, MetricRegistry, Store, StoreError, WatchFeed } from "@koder/fleet-core"
import { Duration, Effect, Either, Layer, type Scope } from "effect"
import type pg from "pg"
import * as ChangePoller from "./internal/changePoller.js"
import * as Compactor from "./internal/compactor.js"
import * as Connection from "./internal/connection.js"
import * as GroupCommit from "./internal/groupCommit.js"
import * as LogQueries from "./internal/logQueries.js"
import * as Schema from "./internal/schema.js"
import { AccessDenied, ConnectFailed, InvalidConfig, type PgStoreError } from "./PgStoreError.js"

/** How to open a store. */
export interface Config {
  /** A libpq-style connection URL: `postgres://user@host:5432/db`. */
  readonly url: string
  /** The PostgreSQL schema holding the tables (default "fleet"); created when missing. */
  readonly schema?: string
  /**
   * The tenant whose rows this store reads and writes (default: the untenanted store). The
   * connecting role must be a member of `fleet_tenant_<tenant>` (see `PgAdmin.createTenantRole`).
   */
  readonly tenant?: string
  /** Connections in the pool (default 10); the LISTEN connection comes on top. */
  readonly poolSize?: number
  /** Retention and batching of background compaction (default `CompactionPolicy.defaults`). */
  readonly compaction?: Partial<CompactionPolicy.CompactionPolicy>
  /** `application_name` of every connection (default "koder-fleet"), as seen in pg_stat_activity. */
  readonly applicationName?: string
  /** Events the watch ring keeps in memory (default: WatchFeed's). */
  readonly watchRingEvents?: number
}

/** Counters of a running store (for tests and metrics). */
export interface Stats extends GroupCommit.WriteStats, ChangePoller.PollStats {
  readonly compactions: number
  readonly compactedRows: number
}

/** The Store service plus PostgreSQL-specific introspection. */
export interface PgStoreService extends Store.StoreService {
  readonly stats: Effect.Effect<Stats>
}

const closedError = () => new StoreError.Unavailable({ reason: "store closed", retryable: false })

const lonelySurrogate = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/

/** PostgreSQL text holds neither NUL nor lone surrogates; refuse them rather than corrupt data. */
const invalidText = (ops: ReadonlyArray<Store.TxnOp>): StoreError.Unavailable | undefined => {
  for (const op of ops) {
    for (const [what, text] of [["key", op.key], ["value", "value" in op ? op.value : ""]] as const) {
      if (text.includes("\u0000") || lonelySurrogate.test(text)) {
        return new StoreError.Unavailable({
          reason: `the ${what} of ${JSON.stringify(op.key.slice(0, 200))} contains NUL or an unpaired surrogate, which PostgreSQL text cannot store`,
          retryable: false
        })
      }
    }
  }
  return undefined
}

const validate = (config: Config): Either.Either<void, InvalidConfig> => {
  const schema = config.schema ?? "fleet"
  if (!Connection.isValidSchema(schema)) {
    return Either.left(new InvalidConfig({ reason: `schema ${JSON.stringify(schema)} must match [a-z_][a-z0-9_]{0,29} and not start with pg_` }))
  }
  if (config.tenant !== undefined && (config.tenant === "" || !Connection.isValidTenant(config.tenant))) {
    return Either.left(new InvalidConfig({ reason: `tenant ${JSON.stringify(config.tenant)} must match [a-z0-9_]{1,30}` }))
  }
  if (config.poolSize !== undefined && !(Number.isSafeInteger(config.poolSize) && config.poolSize >= 2)) {
    return Either.left(new InvalidConfig({ reason: `poolSize must be an integer ≥ 2, not ${config.poolSize}` }))
  }
  return Either.right(undefined)
}

/**
 * Open a store: create or migrate its schema, make sure its tenant's counter row exists, start
 * listening and compacting. The store lives as long as the scope: closing the scope drains
 * queued writes, stops the poller and the compactor, ends every watch and closes the pool.
 */
export const make = (config: Config): Effect.Effect<PgStoreService, PgStoreError, Scope.Scope> =>
  Effect.gen(function* () {
    yield* validate(config)
    const schema = config.schema ?? "fleet"
    const tenant = config.tenant ?? ""
    const connect: Connection.ConnectOptions = { url: config.url, applicationName: config.applicationName ?? "koder-fleet", tenant }
    const policy: CompactionPolicy.CompactionPolicy = { ...CompactionPolicy.defaults, ...config.compaction }
    const channel = Connection.channel(schema, tenant)
    const t = Connection.literal(tenant)

    const pool = yield* Effect.acquireRelease(
      Effect.sync(() => Connection.makePool({ ...connect, size: config.poolSize ?? 10 })),
      (pool) => Effect.promise(() => pool.end().catch(() => undefined))
    )

    // Schema and tenant row, on one connection.
    const opened = yield* Effect.tryPromise({
      try: async (): Promise<PgStoreError | undefined> => {
        let client: pg.PoolClient
        try {
          client = await pool.connect()
        } catch (e) {
          return new ConnectFailed({ schema, reason: Connection.messageOf(e) })
        }
        try {
          const failure = await Schema.ensure(client, schema)
          if (failure !== undefined) return failure
          await client.query(
            `BEGIN; SELECT set_config('fleet.tenant', ${t}, true);
             INSERT INTO ${schema}.tenants (tenant, revision, compact_revision) VALUES (${t}, 0, 0) ON CONFLICT (tenant) DO NOTHING;
             COMMIT`
          )
          return undefined
        } catch (e) {
          await client.query("ROLLBACK").catch(() => undefined)
          const code = (e as { code?: unknown }).code
          return code === "42501"
            ? new AccessDenied({ schema, tenant, reason: Connection.messageOf(e) })
            : new ConnectFailed({ schema, reason: Connection.messageOf(e) })
        } finally {
          client.release()
        }
      },
      catch: (e) => new ConnectFailed({ schema, reason: Connection.messageOf(e) })
    })
    if (opened !== undefined) return yield* Effect.fail(opened)

    const queries = LogQueries.make(schema, tenant)
    const initial = yield* Effect.tryPromise({
      try: () => queries.heads(pool),
      catch: (e) => new ConnectFailed({ schema, reason: Connection.messageOf(e) })
    })

    let closed = false

    const feed = WatchFeed.make(
      {
        compactRevision: Effect.tryPromise({
          try: async () => (await queries.heads(pool)).compactRevision,
          catch: (e) => Connection.unavailable("reading the compaction horizon", e)
        }),
        readEvents: (prefix, after, upTo, limit) =>
          Effect.flatMap(
            Effect.tryPromise({
              try: () => queries.events(pool, prefix, after, upTo, limit, true),
              catch: (e) => Connection.unavailable("reading watch history", e)
            }),
            (batch): Effect.Effect<ReadonlyArray<Store.WatchEvent>, StoreError.Compacted> =>
              after < batch.horizon
                ? Effect.fail(new StoreError.Compacted({ requestedRevision: after, compactRevision: batch.horizon }))
                : Effect.succeed(batch.events)
          )
      },
      { initialRevision: initial.revision, ...(config.watchRingEvents === undefined ? {} : { ringEvents: config.watchRingEvents }) }
    )

    const poller = ChangePoller.make({ connect, channel, pool, queries, feed })

    const writer = GroupCommit.make({
      pool,
      schema,
      tenant,
      channel,
      // Our own commit goes straight to the feed when it is next in line; otherwise another
      // process committed in between and the poller reads the whole gap from the log.
      onCommitted: (events) => (feed.head() === events[0]!.revision - 1 ? feed.publish(events) : poller.wake()),
      onUnknown: () => poller.wake(),
      onBatch: FleetMetrics.store(yield* MetricRegistry.MetricRegistry).batchSize.observe
    })

    const compactor = Compactor.make({ pool, schema, tenant, queries, policy })

    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        closed = true
        await writer.drain()
        await poller.stop()
        feed.close("store closed")
      })
    )

    // Background compaction: wake every interval, drain what the policy allows batch by batch.
    const backgroundStep = Effect.tryPromise(() => compactor.backgroundStep())
    const drainSteps: Effect.Effect<void, unknown> = Effect.flatMap(backgroundStep, (more) =>
      more && !closed ? Effect.zipRight(Effect.yieldNow(), drainSteps) : Effect.void
    )
    yield* drainSteps.pipe(
      Effect.catchAll((e) => Effect.logDebug("store compaction step failed; will retry", e)),
      Effect.zipLeft(Effect.sleep(Duration.millis(policy.intervalMillis))),
      Effect.forever,
      Effect.forkScoped
    )

    /** Run a read unless closed; driver errors become `Unavailable`. */
    const read = <A>(what: string, f: (db: pg.Pool) => Promise<A>): Effect.Effect<A, StoreError.Unavailable> =>
      Effect.suspend(() =>
        closed ? Effect.fail(closedError()) : Effect.tryPromise({ try: () => f(pool), catch: (e) => Connection.unavailable(what, e) })
      )

    /** Queue a mutation; resolves after its batch commits. */
    const submit = (ops: ReadonlyArray<Store.TxnOp>) =>
      Effect.async<ReadonlyArray<Store.TxnResult>, GroupCommit.Rejection | StoreError.Unavailable>((resume) => {
        if (closed) return resume(Effect.fail(closedError()))
        const invalid = invalidText(ops)
        if (invalid) return resume(Effect.fail(invalid))
        writer.submit(ops, (outcome) => resume(GroupCommit.isFailure(outcome) ? Effect.fail(outcome) : Effect.succeed(outcome)))
      })

    const single = <E>(op: Store.TxnOp) =>
      Effect.map(submit([op]) as Effect.Effect<ReadonlyArray<Store.TxnResult>, E | StoreError.Unavailable>, (rs) => rs[0]!)

    const list: Store.StoreService["list"] = (prefix, options = {}) =>
      Effect.gen(function* () {
        let requested = options.atRevision && options.atRevision > 0 ? options.atRevision : 0
        let after: string | undefined
        let token: ContinueToken.ContinueToken | undefined
        if (options.continue !== undefined) {
          token = yield* ContinueToken.decode(options.continue)
          // A token pins a revision ≥ 1 (the head of a non-empty store when it was issued).
          requested = Math.max(token.revision, 1)
          after = token.after
        }
        const limit = options.limit && options.limit > 0 ? options.limit : undefined
        const page = yield* read("list", (db) => queries.list(db, prefix, requested, after, limit))
        if (token !== undefined && token.revision < page.horizon) return yield* Effect.fail(ContinueToken.expired(token.revision, page.horizon))
        if (page.at < page.horizon) {
          return yield* Effect.fail(new StoreError.Compacted({ requestedRevision: page.at, compactRevision: page.horizon }))
        }
        const remaining = page.total - page.items.length
        const last = page.items[page.items.length - 1]
        return {
          items: page.items,
          revision: page.at,
          continue: remaining > 0 && last ? ContinueToken.encode({ revision: page.at, after: last.key }) : undefined,
          remaining: remaining > 0 ? remaining : 0
        }
      })

    const compact = (revision: number): Effect.Effect<void, StoreError.Unavailable> => {
      const loop: Effect.Effect<void, StoreError.Unavailable> = Effect.flatMap(
        read("compact", () => compactor.step(revision, true)),
        (result) => (result.more ? Effect.zipRight(Effect.yieldNow(), loop) : Effect.void)
      )
      return loop
    }

    const service: PgStoreService = {
      currentRevision: read("reading the current revision", async (db) => (await queries.heads(db)).revision),
      compactRevision: read("reading the compaction horizon", async (db) => (await queries.heads(db)).compactRevision),
      get: (key) =>
        Effect.flatMap(read("get", (db) => queries.get(db, key)), (kv) =>
          kv === undefined ? Effect.fail(new StoreError.NotFound({ key })) : Effect.succeed(kv)
        ),
      list,
      count: (prefix) => read("count", (db) => queries.count(db, prefix)),
      create: (key, value) => Effect.map(single<StoreError.AlreadyExists>({ op: "create", key, value }), (r) => r.kv!),
      update: (key, value, expectedRevision) =>
        Effect.map(single<StoreError.NotFound | StoreError.Conflict>({ op: "update", key, value, expectedRevision }), (r) => r.kv!),
      delete: (key, expectedRevision) =>
        Effect.map(
          single<StoreError.NotFound | StoreError.Conflict>(
            expectedRevision === undefined ? { op: "delete", key } : { op: "delete", key, expectedRevision }
          ),
          (r): Store.Deleted => ({ revision: r.revision, prev: r.kv! })
        ),
      txn: (ops) => (ops.length === 0 ? Effect.suspend(() => (closed ? Effect.fail(closedError()) : Effect.succeed([]))) : submit(ops)),
      watch: (prefix, fromRevision) => feed.watch(prefix, fromRevision),
      compact,
      stats: Effect.sync(() => ({ ...writer.stats(), ...poller.stats(), ...compactor.stats() }))
    }
    return service
  })

/** The Store port on PostgreSQL, for the lifetime of the layer. */
export const layer = (config: Config): Layer.Layer<Store.Store, PgStoreError> => Layer.scoped(Store.Store, make(config))
