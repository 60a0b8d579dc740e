/**
 * The controller manager: runs a set of reconcilers — only while this process leads, when an
 * election is configured (several control-plane processes over one PostgreSQL store), or always
 * (one process over SQLite is its own leader). Losing leadership stops every reconciler and its
 * informers at once; winning it again starts them fresh from a new list, so a new leader never
 * acts on what an old term cached.
 *
 *   elect? ─▶ lead ─▶ Controller.start(reconcilers) + alongside (scheduler) ─▶ … ─▶ lost ─▶ stop all ─▶ campaign again
 */
import { Effect, type Scope } from "effect"
import type { ApiClient } from "../client/ApiClient.js"
import * as LeaderElection from "../coordination/LeaderElection.js"
import * as FleetMetrics from "../observability/FleetMetrics.js"
import { MetricRegistry } from "../observability/MetricRegistry.js"
import type { Store } from "../store/Store.js"
import * as Controller from "./Controller.js"

/** How to run the manager (the controllers act through the context's `ApiClient`). */
export interface Options {
  readonly reconcilers: ReadonlyArray<Controller.Reconciler>
  /** Lead only while holding this lease; absent: always lead. */
  readonly election?: LeaderElection.Config
  /** Told each time a term starts (with the running controllers) and ends (undefined). */
  readonly onTerm?: (running: Controller.Running | undefined) => void
  /** Component name on Events. */
  readonly component?: string
  /** Started with the controllers in every term, sharing their informers (the scheduler). */
  readonly alongside?: (running: Controller.Running) => Effect.Effect<unknown, never, Scope.Scope | ApiClient>
}

const lead = (options: Options): Effect.Effect<never, never, Scope.Scope | ApiClient> =>
  Effect.gen(function* () {
    // 1 for the length of the term (always, without an election).
    const leading = FleetMetrics.leader(yield* MetricRegistry).status.labels(options.component ?? "fleet-controller-manager")
    yield* Effect.acquireRelease(Effect.sync(() => leading.set(1)), () => Effect.sync(() => leading.set(0)))
    const running = yield* Controller.start({
      reconcilers: options.reconcilers,
      ...(options.component === undefined ? {} : { component: options.component })
    })
    if (options.alongside !== undefined) yield* options.alongside(running)
    options.onTerm?.(running)
    yield* Effect.addFinalizer(() => Effect.sync(() => options.onTerm?.(undefined)))
    return yield* Effect.never
  })

/** Run until interrupted (leading whenever the election allows). */
export const run = (options: Options): Effect.Effect<never, never, Store | ApiClient> => {
  if (options.election === undefined) return Effect.scoped(lead(options))
  const election = options.election
  return LeaderElection.run(election, () => Effect.scoped(lead(options))).pipe(
    // `lead` never ends on its own, so the election only returns if interrupted.
    Effect.zipRight(Effect.never)
  )
}
