/**
 * Lease-based leader election over the Store (DESIGN §1: active-passive control planes), in the
 * manner of client-go's leaderelection: candidates compare-and-swap a `coordination.k8s.io/v1`
 * Lease; the holder renews it every `retryPeriod`; others take over once they have seen it
 * unchanged for `leaseDuration` (measured on their own clock, so clock skew between hosts does
 * not matter). The leader-only work receives a fencing token (see Fencing.ts) and is interrupted
 * the moment leadership is lost.
 *
 *   observe lease ─▶ decide(now) ─▶ acquire ─▶ lead(token) ─▶ renew every retryPeriod
 *        ▲              │ follow                  │ renew fails past renewDeadline / lease lost
 *        └── sleep ◀────┘                         └──▶ interrupt leader work, campaign again
 */
import type { Exit} from "effect";
import { Clock, Duration, Effect, Either, Fiber, Option } from "effect"
import * as Keys from "../store/Keys.js"
import { Store, type KeyValue, type StoreService, type TxnOp } from "../store/Store.js"
import type { FencingToken } from "./Fencing.js"

/** Who is campaigning for what, and how fast. */
export interface Config {
  readonly namespace: string
  readonly name: string
  /** This candidate's identity (unique per process: host name + pid + random suffix). */
  readonly identity: string
  /** How long a lease stays valid without renewal (default 15 s). */
  readonly leaseDuration?: Duration.DurationInput
  /** The leader gives up if it cannot renew for this long (default 10 s; < leaseDuration). */
  readonly renewDeadline?: Duration.DurationInput
  /** How often candidates retry and the leader renews (default 2 s). */
  readonly retryPeriod?: Duration.DurationInput
  /** Release the lease when the election is interrupted (default true), so a successor need not wait. */
  readonly releaseOnCancel?: boolean
}

/** The timings in milliseconds, with defaults applied. */
export interface Timing {
  readonly leaseMs: number
  readonly renewDeadlineMs: number
  readonly retryMs: number
}

/** The defaults of the issue: 15 s lease, 10 s renew deadline, 2 s retry. */
export const timing = (config: Config): Timing => ({
  leaseMs: Duration.toMillis(config.leaseDuration ?? "15 seconds"),
  renewDeadlineMs: Duration.toMillis(config.renewDeadline ?? "10 seconds"),
  retryMs: Duration.toMillis(config.retryPeriod ?? "2 seconds")
})

/** The Lease's spec as the election reads it. */
export interface LeaseSpec {
  readonly holderIdentity: string
  readonly leaseDurationSeconds: number
  readonly acquireTime: string
  readonly renewTime: string
  readonly leaseTransitions: number
}

/** The lease as this candidate last saw it, and when (on its own clock). */
export interface Observation {
  readonly spec: LeaseSpec
  readonly revision: number
  readonly observedAt: number
}

/** What the candidate should do next. */
export type Decision =
  | { readonly _tag: "Create" }
  | { readonly _tag: "TakeOver"; readonly term: number }
  | { readonly _tag: "Renew" }
  | { readonly _tag: "Follow"; readonly holder: string; readonly expiresAt: number }

/**
 * The pure election decision. A lease is free when absent, released (empty holder), or unchanged
 * for its whole duration since this candidate first saw its current revision.
 */
export const decide = (identity: string, observation: Observation | undefined, now: number): Decision => {
  if (observation === undefined) return { _tag: "Create" }
  const { spec } = observation
  if (spec.holderIdentity === identity) return { _tag: "Renew" }
  const expiresAt = observation.observedAt + spec.leaseDurationSeconds * 1000
  if (spec.holderIdentity === "" || now >= expiresAt) return { _tag: "TakeOver", term: spec.leaseTransitions + 1 }
  return { _tag: "Follow", holder: spec.holderIdentity, expiresAt }
}

/** The store key of the election's Lease object. */
export const leaseKey = (config: Pick<Config, "namespace" | "name">): string =>
  Keys.object({ group: "coordination.k8s.io", resource: "leases", namespace: config.namespace, name: config.name })

/** The store key of the election's term record, the target of fencing checks. */
export const termKey = (config: Pick<Config, "namespace" | "name">): string =>
  Keys.object({ group: "fleet.koder.dev", resource: "leaderterms", namespace: config.namespace, name: config.name })

/** Kubernetes MicroTime: RFC 3339 with microseconds. */
const microTime = (millis: number) => new Date(millis).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z")

const encodeLease = (config: Config, spec: LeaseSpec, previous: string | undefined): string => {
  const old = previous === undefined ? undefined : (JSON.parse(previous) as { metadata?: Record<string, unknown> })
  return JSON.stringify({
    apiVersion: "coordination.k8s.io/v1",
    kind: "Lease",
    metadata: old?.metadata ?? {
      name: config.name,
      namespace: config.namespace,
      uid: crypto.randomUUID(),
      creationTimestamp: new Date(Date.parse(spec.renewTime)).toISOString().replace(/\.\d{3}Z$/, "Z")
    },
    spec
  })
}

/** Read a Lease's spec from its stored JSON; a malformed lease counts as free. */
export const parseLease = (value: string): LeaseSpec => {
  try {
    const spec = (JSON.parse(value) as { spec?: Partial<LeaseSpec> }).spec ?? {}
    return {
      holderIdentity: spec.holderIdentity ?? "",
      leaseDurationSeconds: spec.leaseDurationSeconds ?? 0,
      acquireTime: spec.acquireTime ?? "",
      renewTime: spec.renewTime ?? "",
      leaseTransitions: spec.leaseTransitions ?? 0
    }
  } catch {
    return { holderIdentity: "", leaseDurationSeconds: 0, acquireTime: "", renewTime: "", leaseTransitions: 0 }
  }
}

/** Who leads now, as far as the store says: the holder of an unexpired-looking lease. */
export interface Leader {
  readonly holder: string
  readonly term: number
  readonly renewTime: string
  readonly revision: number
}

/** The current holder of the election's lease, if any (by the lease's own renew time). */
export const observe = (config: Pick<Config, "namespace" | "name">) =>
  Effect.gen(function* () {
    const store = yield* Store
    const kv = yield* Effect.option(Effect.catchTag(store.get(leaseKey(config)), "NotFound", () => Effect.fail(undefined)))
    if (Option.isNone(kv)) return Option.none<Leader>()
    const spec = parseLease(kv.value.value)
    const now = yield* Clock.currentTimeMillis
    const live = spec.holderIdentity !== "" && Date.parse(spec.renewTime) + spec.leaseDurationSeconds * 1000 > now
    return live
      ? Option.some<Leader>({ holder: spec.holderIdentity, term: spec.leaseTransitions, renewTime: spec.renewTime, revision: kv.value.modRevision })
      : Option.none<Leader>()
  })

/** One candidate's view across rounds. */
interface Candidate {
  observation: Observation | undefined
}

const readLease = (store: StoreService, config: Config, candidate: Candidate, now: number) =>
  store.get(leaseKey(config)).pipe(
    Effect.map((kv): KeyValue | undefined => kv),
    Effect.catchTag("NotFound", () => Effect.succeed(undefined)),
    Effect.map((kv) => {
      if (kv === undefined) {
        candidate.observation = undefined
        return undefined
      }
      // The lease's age is measured from when we first saw this revision, on our own clock.
      const seenBefore = candidate.observation?.revision === kv.modRevision
      candidate.observation = {
        spec: parseLease(kv.value),
        revision: kv.modRevision,
        observedAt: seenBefore ? candidate.observation!.observedAt : now
      }
      return kv
    })
  )

/** Try to become leader; the token on success, `undefined` when another candidate won the race. */
const acquire = (store: StoreService, config: Config, t: Timing, current: KeyValue | undefined, term: number, now: number) =>
  Effect.gen(function* () {
    const spec: LeaseSpec = {
      holderIdentity: config.identity,
      leaseDurationSeconds: Math.ceil(t.leaseMs / 1000),
      acquireTime: microTime(now),
      renewTime: microTime(now),
      leaseTransitions: term
    }
    const lease = encodeLease(config, spec, current?.value)
    const tKey = termKey(config)
    const termNow = yield* Effect.either(store.get(tKey))
    const termValue = JSON.stringify({ holder: config.identity, term })
    const ops: Array<TxnOp> = [
      current === undefined
        ? { op: "create", key: leaseKey(config), value: lease }
        : { op: "update", key: leaseKey(config), value: lease, expectedRevision: current.modRevision },
      Either.isRight(termNow)
        ? { op: "update", key: tKey, value: termValue, expectedRevision: termNow.right.modRevision }
        : { op: "create", key: tKey, value: termValue }
    ]
    const result = yield* Effect.either(store.txn(ops))
    if (Either.isLeft(result)) {
      if (result.left._tag === "Unavailable") return yield* Effect.fail(result.left)
      return undefined
    }
    const token: FencingToken = { key: tKey, revision: result.right[1]!.revision, term, holder: config.identity }
    return { token, leaseRevision: result.right[0]!.revision, leaseValue: lease, spec }
  })

/**
 * Campaign for leadership and run `lead` while leader. `lead` is interrupted when leadership is
 * lost, and the candidate campaigns again; the effect ends when `lead` ends (releasing the lease).
 * Interrupting the election releases the lease unless `releaseOnCancel` is false.
 */
export const run = <A, E, R>(config: Config, lead: (token: FencingToken) => Effect.Effect<A, E, R>) =>
  Effect.gen(function* () {
    const store = yield* Store
    const t = timing(config)
    const candidate: Candidate = { observation: undefined }

    for (;;) {
      const now = yield* Clock.currentTimeMillis
      const kv = yield* Effect.either(readLease(store, config, candidate, now))
      if (Either.isLeft(kv)) {
        yield* Effect.sleep(t.retryMs)
        continue
      }
      const decision = decide(config.identity, candidate.observation, now)
      // A lease still held under our name (we restarted quickly) is ours to take over with a new term.
      const term =
        decision._tag === "Create" ? 0 : decision._tag === "Follow" ? -1 : candidate.observation!.spec.leaseTransitions + 1
      if (decision._tag === "Follow") {
        yield* Effect.sleep(Math.max(1, Math.min(t.retryMs, decision.expiresAt - now)))
        continue
      }
      const won = yield* Effect.either(acquire(store, config, t, kv.right, term, now))
      if (Either.isLeft(won) || won.right === undefined) {
        yield* Effect.sleep(t.retryMs)
        continue
      }
      const outcome = yield* leadTerm(store, config, t, won.right, lead)
      if (Option.isSome(outcome)) return yield* outcome.value
      candidate.observation = undefined
    }
  })

/** Hold one term: run `lead`, renew until it ends or the lease is lost. `None` means lost. */
const leadTerm = <A, E, R>(
  store: StoreService,
  config: Config,
  t: Timing,
  won: { token: FencingToken; leaseRevision: number; leaseValue: string; spec: LeaseSpec },
  lead: (token: FencingToken) => Effect.Effect<A, E, R>
) =>
  Effect.gen(function* () {
    let leaseRevision = won.leaseRevision
    let leaseValue = won.leaseValue
    let spec = won.spec
    let lastRenew = yield* Clock.currentTimeMillis
    const key = leaseKey(config)

    // Released as client-go does: no holder, a one-second duration, the term count kept.
    const release = Effect.suspend(() =>
      store.update(key, encodeLease(config, { ...spec, holderIdentity: "", leaseDurationSeconds: 1 }, leaseValue), leaseRevision)
    ).pipe(Effect.ignore)

    const worker = yield* Effect.fork(lead(won.token))
    const exit = yield* Effect.gen(function* () {
      for (;;) {
        const done = yield* Effect.raceFirst(
          Effect.map(Fiber.await(worker), Option.some),
          Effect.as(Effect.sleep(t.retryMs), Option.none<Exit.Exit<A, E>>())
        )
        if (Option.isSome(done)) return Option.some(done.value)
        const now = yield* Clock.currentTimeMillis
        const renewed: LeaseSpec = { ...spec, renewTime: microTime(now) }
        const value = encodeLease(config, renewed, leaseValue)
        const result = yield* Effect.either(store.update(key, value, leaseRevision))
        if (Either.isRight(result)) {
          leaseRevision = result.right.modRevision
          leaseValue = value
          spec = renewed
          lastRenew = now
          continue
        }
        const lost = result.left._tag !== "Unavailable"
        if (lost || now - lastRenew >= t.renewDeadlineMs) return Option.none<Exit.Exit<A, E>>()
      }
    }).pipe(
      Effect.onInterrupt(() =>
        Effect.zipRight(Fiber.interrupt(worker), config.releaseOnCancel === false ? Effect.void : release)
      )
    )
    if (Option.isNone(exit)) {
      yield* Fiber.interrupt(worker)
      return Option.none<Exit.Exit<A, E>>()
    }
    yield* release
    return Option.some(exit.value)
  })

/** A reasonable unique identity for this candidate. */
export const identity = (host: string, pid: number): string => `${host}_${pid}_${crypto.randomUUID().slice(0, 8)}`
