import { Fencing, LeaderElection, Store, StoreError } from "@koder/fleet-core"
import { describe, expect, it } from "@effect/vitest"
import { Deferred, Effect, Either, Fiber, Layer, Option, Ref, TestClock } from "effect"

const base = { namespace: "kube-system", name: "fleet-controller", leaseDuration: "15 seconds", renewDeadline: "10 seconds", retryPeriod: "2 seconds" } as const
const spec = (holder: string, transitions = 0): LeaderElection.LeaseSpec => ({
  holderIdentity: holder,
  leaseDurationSeconds: 15,
  acquireTime: "",
  renewTime: "",
  leaseTransitions: transitions
})

describe("LeaderElection.decide", () => {
  it.each([
    { name: "no lease: create it", obs: undefined, now: 0, want: { _tag: "Create" } },
    { name: "our own lease: renew", obs: { spec: spec("me"), revision: 3, observedAt: 0 }, now: 99_000, want: { _tag: "Renew" } },
    { name: "a fresh foreign lease: follow", obs: { spec: spec("other"), revision: 3, observedAt: 10_000 }, now: 20_000, want: { _tag: "Follow", holder: "other", expiresAt: 25_000 } },
    { name: "unchanged for its whole duration: take over", obs: { spec: spec("other", 4), revision: 3, observedAt: 10_000 }, now: 25_000, want: { _tag: "TakeOver", term: 5 } },
    { name: "released (no holder): take over at once", obs: { spec: spec("", 2), revision: 3, observedAt: 10_000 }, now: 10_001, want: { _tag: "TakeOver", term: 3 } }
  ])("$name", ({ obs, now, want }) => {
    expect(LeaderElection.decide("me", obs, now)).toEqual(want)
  })
})

/** Run a candidate whose leader work records its token and waits forever. */
const candidate = (identity: string, leaders: Ref.Ref<Array<Fencing.FencingToken>>, releaseOnCancel = true) =>
  LeaderElection.run({ ...base, identity, releaseOnCancel }, (token) =>
    Effect.zipRight(Ref.update(leaders, (l) => [...l, token]), Effect.never)
  )

/** Advance the test clock in retry-period steps until `done` holds (or give up). */
const advanceUntil = (done: Effect.Effect<boolean>, stepSeconds = 1, maxSteps = 60) =>
  Effect.gen(function* () {
    for (let i = 0; i < maxSteps; i++) {
      if (yield* done) return i * stepSeconds
      yield* TestClock.adjust(`${stepSeconds} seconds`)
    }
    return -1
  })

const fencedWrite = (token: Fencing.FencingToken, key: string) =>
  Effect.flatMap(Store.Store, (store) => Effect.either(store.txn(Fencing.guard(token, [{ op: "create", key, value: token.holder }]))))

describe("LeaderElection.run", () => {
  it.effect("elects one leader, writes a Kubernetes Lease, and lets only it pass the fence", () =>
    Effect.gen(function* () {
      const leaders = yield* Ref.make<Array<Fencing.FencingToken>>([])
      const a = yield* Effect.fork(candidate("a", leaders))
      yield* advanceUntil(Effect.map(Ref.get(leaders), (l) => l.length === 1))
      const b = yield* Effect.fork(candidate("b", leaders))
      yield* TestClock.adjust("10 seconds")
      const [token] = yield* Ref.get(leaders)
      expect(token).toMatchObject({ holder: "a", term: 0 })

      const store = yield* Store.Store
      const lease = JSON.parse((yield* store.get(LeaderElection.leaseKey(base))).value)
      expect(lease).toMatchObject({ apiVersion: "coordination.k8s.io/v1", kind: "Lease", metadata: { name: "fleet-controller", namespace: "kube-system" }, spec: { holderIdentity: "a", leaseDurationSeconds: 15, leaseTransitions: 0 } })
      expect(lease.spec.renewTime).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/)
      expect(Option.getOrThrow(yield* LeaderElection.observe(base)).holder).toBe("a")

      expect(Either.isRight(yield* fencedWrite(token!, "/w/1"))).toBe(true)
      expect((yield* Ref.get(leaders)).length).toBe(1) // b is following, not leading
      yield* Fiber.interrupt(b)
      yield* Fiber.interrupt(a)
    }).pipe(Effect.provide(Store.layerMemory)))

  it.effect("fails over after the lease duration when the leader dies, and fences the dead leader's late writes", () =>
    Effect.gen(function* () {
      const leaders = yield* Ref.make<Array<Fencing.FencingToken>>([])
      const a = yield* Effect.fork(candidate("a", leaders, false))
      yield* advanceUntil(Effect.map(Ref.get(leaders), (l) => l.length === 1))
      const b = yield* Effect.fork(candidate("b", leaders))
      yield* TestClock.adjust("4 seconds")
      // "a" dies without releasing: its renewals stop.
      yield* Fiber.interrupt(a)
      const waited = yield* advanceUntil(Effect.map(Ref.get(leaders), (l) => l.length === 2))
      expect(waited).toBeGreaterThanOrEqual(13)
      expect(waited).toBeLessThanOrEqual(15 + 2)
      const [old, next] = yield* Ref.get(leaders)
      expect(next).toMatchObject({ holder: "b", term: 1 })
      const late = yield* fencedWrite(old!, "/w/late")
      expect(Either.isLeft(late) && late.left).toMatchObject({ _tag: "Conflict" })
      expect(Either.isRight(yield* fencedWrite(next!, "/w/new"))).toBe(true)
      yield* Fiber.interrupt(b)
    }).pipe(Effect.provide(Store.layerMemory)))

  it.effect("hands over within a retry period when the leader releases on shutdown", () =>
    Effect.gen(function* () {
      const leaders = yield* Ref.make<Array<Fencing.FencingToken>>([])
      const a = yield* Effect.fork(candidate("a", leaders))
      yield* advanceUntil(Effect.map(Ref.get(leaders), (l) => l.length === 1))
      const b = yield* Effect.fork(candidate("b", leaders))
      yield* TestClock.adjust("5 seconds")
      yield* Fiber.interrupt(a)
      const waited = yield* advanceUntil(Effect.map(Ref.get(leaders), (l) => l.length === 2))
      expect(waited).toBeLessThanOrEqual(2)
      yield* Fiber.interrupt(b)
    }).pipe(Effect.provide(Store.layerMemory)))

  it.effect("interrupts the leader's work when the lease is taken away, then campaigns again", () =>
    Effect.gen(function* () {
      const store = yield* Store.Store
      const stopped = yield* Deferred.make<void>()
      const starts = yield* Ref.make(0)
      const a = yield* Effect.fork(
        LeaderElection.run({ ...base, identity: "a" }, () =>
          Effect.zipRight(Ref.update(starts, (n) => n + 1), Effect.never).pipe(Effect.onInterrupt(() => Deferred.succeed(stopped, undefined)))
        )
      )
      yield* advanceUntil(Effect.map(Ref.get(starts), (n) => n === 1))
      // An operator (or a split-brain peer) overwrites the lease.
      const kv = yield* store.get(LeaderElection.leaseKey(base))
      const stolen = JSON.parse(kv.value)
      stolen.spec.holderIdentity = "intruder"
      yield* store.update(kv.key, JSON.stringify(stolen), kv.modRevision)
      yield* advanceUntil(Deferred.isDone(stopped))
      expect(yield* Deferred.isDone(stopped)).toBe(true)
      // The intruder never renews, so "a" wins again after the lease duration, with a new term.
      yield* advanceUntil(Effect.map(Ref.get(starts), (n) => n === 2))
      expect(yield* Ref.get(starts)).toBe(2)
      yield* Fiber.interrupt(a)
    }).pipe(Effect.provide(Store.layerMemory)))

  it.effect("steps down when it cannot renew within the renew deadline", () =>
    Effect.gen(function* () {
      const down = yield* Ref.make(false)
      // A store whose writes fail while `down` is set, as when the database is unreachable.
      const flaky = Layer.effect(
        Store.Store,
        Effect.map(Store.Store, (s): Store.StoreService => ({
          ...s,
          update: (k, v, r) => Effect.flatMap(Ref.get(down), (d) => (d ? Effect.fail(new StoreError.Unavailable({ reason: "database unreachable", retryable: true })) : s.update(k, v, r)))
        }))
      ).pipe(Layer.provide(Store.layerMemory))
      yield* Effect.gen(function* () {
        const stopped = yield* Deferred.make<void>()
        const a = yield* Effect.fork(
          LeaderElection.run({ ...base, identity: "a" }, () => Effect.never.pipe(Effect.onInterrupt(() => Deferred.succeed(stopped, undefined))))
        )
        yield* TestClock.adjust("1 second")
        yield* Ref.set(down, true)
        yield* TestClock.adjust("8 seconds")
        expect(yield* Deferred.isDone(stopped)).toBe(false)
        const waited = yield* advanceUntil(Deferred.isDone(stopped))
        expect(waited).toBeGreaterThanOrEqual(0)
        expect(waited).toBeLessThanOrEqual(4)
        yield* Fiber.interrupt(a)
      }).pipe(Effect.provide(flaky))
    }))
})
