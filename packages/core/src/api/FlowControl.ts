/**
 * API priority and fairness, sized for one event loop. A server's requests share one thread, so
 * a request admitted beside nine others shares the CPU with all of them, and a burst of users'
 * writes delays the work that finishes what they asked for (the scheduler's bindings, the nodes'
 * status writes) as much as it delays itself. So requests are served at one of two levels:
 *
 *   system    the cluster's own components: nodes (`system:nodes`), the controller manager and
 *             the scheduler. Served at once, as Kubernetes' exempt, system and workload-high levels,
 *             and at `systemSchedulingPriority`: a scheduler that orders fibers' work by priority
 *             (the daemon's EventLoopScheduler) runs their steps before the workload level's.
 *   workload  everyone else (users, service accounts, administrators too): `seats` writes at a
 *             time; the rest wait in a `FairQueue` by user, so one client's flood costs another
 *             client one turn, not the flood's length. Waiting longer than `maxWait`, or finding
 *             `queueLimit` requests waiting, answers 429 with Retry-After, as Kubernetes does.
 *
 * Reads take no seat: they cost a fraction of a write here, and a webhook or controller reading
 * the API while a write waits on it must not queue behind that write. Nor do long-running
 * requests (watches, logs, exec, attach, port-forward, proxy), as in kube-apiserver. Unlike Kubernetes, `system:masters` is not exempt: an administrator's script is
 * as able to swamp the nodes' heartbeats as anyone's. Its own flow keeps another administrator's
 * request from waiting behind it.
 */
import { Duration, Effect, FiberRef } from "effect"
import * as Status from "../model/Status.js"
import * as FleetMetrics from "../observability/FleetMetrics.js"
import type { Registry } from "../observability/MetricRegistry.js"
import * as ApiError from "./ApiError.js"
import type * as Authz from "./Authz.js"
import * as FairQueue from "./FairQueue.js"
import type { UserInfo } from "./Http.js"

/** The priority levels. */
export type Level = "system" | "workload"

/** How the workload level is sized. */
export interface Options {
  /** Workload requests executing at once; 0 serves them all at once (no queueing). */
  readonly seats: number
  /** Workload requests waiting, over every user, before more get 429 (default 1,000). */
  readonly queueLimit?: number
  /** How long a workload request may wait for a seat before it gets 429 (default 15 s, a quarter of the request timeout, as in Kubernetes). */
  readonly maxWait?: Duration.DurationInput
}

/** Workload seats when a server is not told, as measured in `npm run bench -- agent` (docs/architecture.md, "Priority and fairness"). */
export const defaultSeats = 2

/** The users whose requests are the cluster's own work. */
const systemUsers = new Set(["system:kube-controller-manager", "system:kube-scheduler"])

/**
 * The scheduling priority of the system level's requests: before the default (0) wherever a
 * scheduler orders fibers' work (Effect's `PriorityBuckets` runs lower numbers first).
 */
export const systemSchedulingPriority = -1

/** The level a user's requests are served at. */
export const levelOf = (user: UserInfo): Level => (systemUsers.has(user.name) || user.groups.includes("system:nodes") ? "system" : "workload")

/** The scheduling priority a user's requests run at (the default, 0, but for the system level). */
export const schedulingPriorityOf = (user: UserInfo): number => (levelOf(user) === "system" ? systemSchedulingPriority : 0)

const longRunningSubresources = new Set(["log", "exec", "attach", "portforward", "proxy"])

/** Whether a request runs for as long as its client keeps it open (it takes no seat). */
export const isLongRunning = (a: Authz.Attributes): boolean => a.verb === "watch" || a.verb === "proxy" || (a.resourceRequest && longRunningSubresources.has(a.subresource))

/** The verbs that take a seat (reads do not: see above). */
const mutating = new Set(["create", "update", "patch", "delete", "deletecollection"])

/** A request's seat, as the fibers serving it see it. */
interface Holder {
  /** Give the seat up while this fiber waits elsewhere (counted: a request's fibers may overlap). */
  readonly stepAway: () => void
  /** Take a seat again once the last fiber that stepped away is back (429 when that times out). */
  readonly stepBack: () => Effect.Effect<void, ApiError.ApiError>
}

/** The seat of the request a fiber serves, if it took one. */
const currentSeat = FiberRef.unsafeMake<Holder | undefined>(undefined)

/**
 * Run `effect` without the current request's seat, and take a seat again after it: for waits on
 * another server (an admission webhook) that use no CPU here, and that may themselves call this
 * API (a webhook writing through it would otherwise wait for the seat its caller holds).
 */
export const awayFromSeat = <A, E>(effect: Effect.Effect<A, E>): Effect.Effect<A, E | ApiError.ApiError> =>
  Effect.flatMap(FiberRef.get(currentSeat), (holder) =>
    holder === undefined
      ? effect
      : Effect.flatMap(Effect.zipRight(Effect.sync(holder.stepAway), Effect.exit(effect)), (exit) => Effect.zipRight(holder.stepBack(), exit))
  )

/** Priority and fairness in front of the API's handlers. */
export interface FlowControl {
  /** Run `handler` when the request's level lets it: at once, or after its turn in the queue (or fail with 429). */
  readonly serve: <A, E>(attributes: Authz.Attributes, handler: Effect.Effect<A, E>) => Effect.Effect<A, E | ApiError.ApiError>
  /** The workload level's seats and queue, for tests. */
  readonly workload: FairQueue.FairQueue | undefined
  /** Stop reporting this level's gauges (the server is closing). */
  readonly close: () => void
}

/** Build it; its series go to `registry`. */
export const make = (options: Options, registry: Registry): FlowControl => {
  if (options.seats === 0) return { serve: (_, handler) => handler, workload: undefined, close: () => {} }
  const queueLimit = options.queueLimit ?? 1000
  const maxWaitMs = Duration.toMillis(options.maxWait ?? "15 seconds")
  const queue = FairQueue.make(options.seats, queueLimit)
  const metrics = FleetMetrics.flowControl(registry)
  const stopExecuting = metrics.executing.collect((add) => add(["workload"], queue.executing()))
  const stopInqueue = metrics.inqueue.collect((add) => add(["workload"], queue.queued()))
  const waited = { executed: metrics.wait.labels("workload", "true"), gaveUp: metrics.wait.labels("workload", "false") }
  const rejected = { full: metrics.rejected.labels("workload", "queue-full"), timedOut: metrics.rejected.labels("workload", "time-out") }
  const retryAfter = 1
  const tooMany = (why: string) =>
    ApiError.of(Status.tooManyRequests(`Too many requests: ${why}, please try again later.`, retryAfter), { "retry-after": String(retryAfter) })

  /** A request's seat: held now or not, and how many of its fibers stepped away from it. */
  interface Seat {
    readonly flow: string
    held: boolean
    away: number
    retaking: boolean
  }

  /** Wait for a seat; `held` turns true when it is given, and whoever ends the request releases it. */
  const take = (s: Seat) =>
    Effect.async<void, ApiError.ApiError>((resume) => {
      let timer: ReturnType<typeof setTimeout> | undefined = undefined
      const entry = queue.enter(s.flow, () => {
        s.held = true
        if (timer !== undefined) {
          clearTimeout(timer)
          waited.executed.observe((performance.now() - entry!.enqueuedAt) / 1000)
        }
        resume(Effect.void)
      })
      if (entry === undefined) {
        rejected.full.inc()
        return resume(Effect.fail(tooMany(`${queueLimit} requests already wait for the workload priority level's ${queue.seats} seats`)))
      }
      if (entry.started) return
      timer = setTimeout(() => {
        if (!queue.cancel(entry)) return
        rejected.timedOut.inc()
        waited.gaveUp.observe(maxWaitMs / 1000)
        resume(Effect.fail(tooMany(`waited ${maxWaitMs / 1000} s for one of the workload priority level's ${queue.seats} seats`)))
      }, maxWaitMs)
      // Interrupted while waiting (the client went away): out of the queue. Had the seat come just
      // before, `held` is true and the request's own release gives it back.
      return Effect.sync(() => {
        clearTimeout(timer)
        queue.cancel(entry)
      })
    })

  const release = (s: Seat) => {
    if (!s.held) return
    s.held = false
    queue.leave()
  }

  const holderOf = (s: Seat): Holder => ({
    stepAway: () => {
      s.away++
      release(s)
    },
    stepBack: () =>
      Effect.suspend(() => {
        s.away--
        // Only the last fiber back waits for the seat; one already waiting takes it for them all.
        if (s.away > 0 || s.held || s.retaking) return Effect.void
        s.retaking = true
        return Effect.ensuring(take(s), Effect.sync(() => (s.retaking = false)))
      })
  })

  return {
    workload: queue,
    close: () => (stopExecuting(), stopInqueue()),
    serve: (attributes, handler) => {
      if (levelOf(attributes.user) === "system") return Effect.withSchedulingPriority(handler, systemSchedulingPriority)
      if (!mutating.has(attributes.verb) || isLongRunning(attributes)) return handler
      const s: Seat = { flow: attributes.user.name, held: false, away: 0, retaking: false }
      return Effect.ensuring(
        Effect.zipRight(take(s), Effect.locally(handler, currentSeat, holderOf(s))),
        Effect.sync(() => release(s))
      )
    }
  }
}
