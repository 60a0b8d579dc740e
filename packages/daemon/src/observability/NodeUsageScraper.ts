/**
 * metrics-server's scrape, inside the API server: every interval, each node whose agent runs in
 * its own process is asked for its usage (`GET /v1/usage` on the agent's endpoint, with the
 * server's node client certificate) and the answer is recorded in the MetricsSource that
 * `metrics.k8s.io`, `kubectl top` and the HPA read. In-process nodes (`dev`) report directly and
 * are skipped. A node that does not answer keeps its last sample until MetricsSource drops it as
 * stale, as metrics-server does; one slow node never delays the others (each has a timeout).
 */
import { type MetricsSource, type Store, Keys } from "@koder/fleet-core"
import { Duration, Effect, Schedule } from "effect"
import { Agent, request } from "undici"
import { endpointOf } from "../RemoteNodeAccess.js"

/** How the scraper reaches agents and what it skips. */
export interface Options {
  readonly store: Store.StoreService
  readonly client: { readonly cert: string; readonly key: string }
  readonly metrics: MetricsSource.MetricsSourceService
  readonly interval: Duration.Duration
  /** Nodes served in this process (they record their usage themselves). */
  readonly local: () => ReadonlySet<string>
}

const isReport = (v: unknown): v is MetricsSource.NodeReport => {
  const o = v as Partial<MetricsSource.NodeReport> | undefined
  return o !== undefined && typeof o.windowMs === "number" && typeof o.node?.usageNanoCores === "number" && Array.isArray(o.pods)
}

/** One round: every remote node asked at once; answers recorded. Answers how many nodes answered. */
export const scrapeOnce = (options: Options, dispatcher: Agent): Effect.Effect<number> =>
  Effect.gen(function* () {
    const listed = yield* options.store.list(Keys.prefix("", "nodes")).pipe(Effect.orElseSucceed(() => ({ items: [] as ReadonlyArray<{ readonly value: string }> })))
    const local = options.local()
    const nodes = listed.items.map((kv) => JSON.parse(kv.value) as Record<string, unknown>)
    const answered = yield* Effect.forEach(
      nodes,
      (node) => {
        const name = String((node["metadata"] as { name?: string } | undefined)?.name ?? "")
        const endpoint = endpointOf(node)
        if (name === "" || endpoint === undefined || local.has(name)) return Effect.succeed(false)
        const host = endpoint.host.includes(":") ? `[${endpoint.host}]` : endpoint.host
        return Effect.tryPromise(async (signal) => {
          const r = await request(`https://${host}:${endpoint.port}/v1/usage?windowMs=${Duration.toMillis(options.interval)}`, { dispatcher, signal })
          const body: unknown = await r.body.json()
          return r.statusCode === 200 && isReport(body) ? body : undefined
        }).pipe(
          Effect.timeout("10 seconds"),
          Effect.flatMap((report) => (report === undefined ? Effect.succeed(false) : Effect.as(options.metrics.record(name, report), true))),
          Effect.orElseSucceed(() => false)
        )
      },
      { concurrency: 16 }
    )
    return answered.filter(Boolean).length
  })

/** Scrape forever (in the caller's scope: it stops with it). */
export const run = (options: Options): Effect.Effect<never> =>
  Effect.acquireUseRelease(
    Effect.sync(() => new Agent({ connect: { cert: options.client.cert, key: options.client.key, rejectUnauthorized: false }, connectTimeout: 5_000 })),
    (dispatcher) => scrapeOnce(options, dispatcher).pipe(Effect.repeat(Schedule.spaced(options.interval)), Effect.andThen(Effect.never)),
    (dispatcher) => Effect.promise(() => dispatcher.close())
  )
